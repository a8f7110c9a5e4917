package frontier

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Test hooks: read the seen structures without adding to them.

// BloomSize returns the crawl's Bloom filter size (all 0 in exact mode).
func (f *Redis) BloomSize() (m uint64, k int, seg uint64) { return f.bloom.M, f.bloom.K, f.bloom.Seg }

// BloomPositions returns a URL's k bit positions as Go computes them.
func (f *Redis) BloomPositions(url string) []uint64 { return f.bloom.positions(url) }

// NewBloomSize exposes the sizing formula.
func NewBloomSize(n int64, p float64) (m uint64, k int, err error) {
	b, err := newBloomSize(n, p)
	return b.M, b.K, err
}

// BloomSegBits is the segment size of new crawls.
const BloomSegBits = bloomSegBits

// seenHasScript reports, per tuple bucket and field, whether the URL is
// seen (all its Bloom bits set, or its fingerprint field present), writing
// nothing.
//
// ARGV: prefix, n, n × (bucket, field), cfg.
var seenHasScript = redis.NewScript(luaPrelude + `
local n = tonumber(ARGV[2])
local out = {}
for s = 0, n - 1 do
  local x, y = ARGV[3 + 2 * s], ARGV[4 + 2 * s]
  local has = 1
  if BLOOM then
    if not bloom_has(tonumber(x), tonumber(y)) then has = 0 end
  elseif redis.call('HEXISTS', k_seen(x), y) == 0 then
    has = 0
  end
  out[#out + 1] = has
end
return out
`)

// MaybeSeen reports for each URL whether the crawl takes it for seen.
func (f *Redis) MaybeSeen(ctx context.Context, urls []string) ([]bool, error) {
	out := make([]bool, 0, len(urls))
	for len(urls) > 0 {
		n := min(len(urls), 1000)
		args := []any{n}
		for _, u := range urls[:n] {
			var x, y string
			if f.bloom.M > 0 {
				x, y = f.bloom.args(u)
			} else {
				x, y = f.seenSlot(u)
			}
			args = append(args, x, y)
		}
		res, err := f.run(ctx, seenHasScript, args...)
		if err != nil {
			return nil, err
		}
		arr, _ := res.([]any)
		if len(arr) != n {
			return nil, fmt.Errorf("seen check returned %d values for %d", len(arr), n)
		}
		for _, v := range arr {
			i, _ := toInt(v)
			out = append(out, i == 1)
		}
		urls = urls[n:]
	}
	return out, nil
}

// EventID exposes the event-id numbering of stream entries.
var EventID = eventID
