package frontier

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// Bloom-filter dedup (Options.DedupMode "bloom").
//
// The filter is m bits (m a multiple of 8) split into segments of
// bloomSegBits bits, the last one shorter, each a Redis string
// crawl:{name}:bloom:<segment> (Keys.Bloom); bit g of the filter is bit
// g mod bloomSegBits of segment g / bloomSegBits, in SETBIT order (bit 0 is
// the most significant bit of the first byte).
//
// Hashing: h1 and h2 are the first and second 8 bytes (big endian) of the
// SHA-256 of the canonical URL, two independent 64-bit hashes (h1 is
// urlx.Fingerprint). The k bits are g_i = (h1 + i·h2') mod m, i = 0..k-1
// (Kirsch-Mitzenmacher double hashing), with h2' = 1 + h2 mod (m-1) so
// that the step is never 0. Go reduces a = h1 mod m and b = h2' and passes
// them as the tuple's bucket and field (decimal); the script walks
// g = g + b, g = g - m when g >= m. Every value stays below 2m <= 2^43,
// exact in Lua's doubles. Passing the k positions instead would cost 2k
// (about 40) ARGV per link for what are k additions in Lua.
//
// The check-and-set is atomic inside the script (bloom_add in luaPrelude):
// GETBIT the bits in order up to the first 0; the URL is new iff there is
// one, and then that bit and the rest are SETBIT. A seen URL costs k reads
// and no write, a new one at most k+1 calls. That is the cost of the mode:
// about k Redis calls per link against one HSETNX (BenchmarkClaimComplete
// bfs-bloom). Keeping a URL's bits in one segment and reading them with one
// BITFIELD_RO was measured no faster: the script's formatting of the 3k
// BITFIELD arguments costs what the calls save.

// bloomSegBits is the size of a segment: 2^20 bits less 128, so that a
// segment string (131,056 bytes plus its 10 bytes of sds header and
// terminator) fills jemalloc's 128 KiB size class exactly. Segments are
// created at their full length when the crawl is created (allocBloom): a
// SETBIT that creates a string allocates exactly, while growing one over-
// allocates up to 1 MiB. The last segment is only as long as m needs.
const bloomSegBits = 1<<20 - 128

// bloomMaxBits bounds m: positions (below 2m) stay exact in Lua doubles
// far below 2^53, and 2^42 bits is 512 GiB of Redis.
const bloomMaxBits = 1 << 42

// bloomSize is a crawl's Bloom filter: M bits, K hash functions, segments
// of Seg bits. The zero value means exact mode.
type bloomSize struct {
	M   uint64
	K   int
	Seg uint64
}

// newBloomSize sizes a filter for n URLs at false-positive rate p:
// m = ceil(-n ln p / (ln 2)^2) rounded up to whole bytes, k = round(m/n
// ln 2). n below 1000 counts as 1000.
func newBloomSize(n int64, p float64) (bloomSize, error) {
	n = max(n, 1000)
	m := math.Ceil(-float64(n)*math.Log(p)/(math.Ln2*math.Ln2)/8) * 8
	if m > bloomMaxBits {
		return bloomSize{}, fmt.Errorf("bloom filter of %.0f bits for %d URLs at %v is too large (max %d)", m, n, p, uint64(bloomMaxBits))
	}
	k := max(int(math.Round(m/float64(n)*math.Ln2)), 1)
	return bloomSize{M: uint64(m), K: k, Seg: bloomSegBits}, nil
}

func parseBloomSize(m, k, seg string) (bloomSize, error) {
	var b bloomSize
	var err1, err2, err3 error
	b.M, err1 = strconv.ParseUint(m, 10, 64)
	b.K, err2 = strconv.Atoi(k)
	b.Seg, err3 = strconv.ParseUint(seg, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || b.M < 8 || b.M%8 != 0 || b.M > bloomMaxBits || b.K < 1 || b.K > 64 ||
		b.Seg < 8 || b.Seg%8 != 0 || b.Seg > 1<<32 {
		return bloomSize{}, fmt.Errorf("invalid bloom filter size m=%q k=%q seg=%q", m, k, seg)
	}
	return b, nil
}

// segments returns the number of segment keys.
func (b bloomSize) segments() uint64 { return (b.M + b.Seg - 1) / b.Seg }

// hashes returns the URL's h1 (its fingerprint) and h2.
func bloomHashes(url string) (h1, h2 uint64) {
	sum := sha256.Sum256([]byte(url))
	return binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])
}

// args returns a URL's tuple bucket and field: a = h1 mod m and
// b = 1 + h2 mod (m-1), in decimal.
func (b bloomSize) args(url string) (string, string) {
	h1, h2 := bloomHashes(url)
	return strconv.FormatUint(h1%b.M, 10), strconv.FormatUint(1+h2%(b.M-1), 10)
}

// positions returns a URL's k bit positions, as the script computes them.
func (b bloomSize) positions(url string) []uint64 {
	h1, h2 := bloomHashes(url)
	g, d := h1%b.M, 1+h2%(b.M-1)
	out := make([]uint64, b.K)
	for i := range out {
		out[i] = g
		if g += d; g >= b.M {
			g -= b.M
		}
	}
	return out
}

// allocBloom creates every segment at its full length, zeroed, by setting
// its last bit to 0 (a no-op on a segment that exists), in pipelined
// batches. Only the process that created the crawl does it; a segment it
// has not created yet is created by the first SETBIT into it, which is as
// correct, only less tightly allocated.
func (f *shard) allocBloom(ctx context.Context) error {
	const batch = 1000
	segs := f.bloom.segments()
	for s := uint64(0); s < segs; s += batch {
		pipe := f.rdb.Pipeline()
		for i := s; i < min(s+batch, segs); i++ {
			last := min(f.bloom.M-i*f.bloom.Seg, f.bloom.Seg) - 1
			pipe.SetBit(ctx, f.keys.Bloom(i), int64(last), 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}
