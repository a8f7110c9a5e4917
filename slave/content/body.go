package content

import (
	"bytes"
	"crypto/sha1"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// DefaultMemLimit is the largest body kept in memory when
// BodyOptions.MemLimit is 0.
const DefaultMemLimit = 64 << 10

// headLen is how many leading bytes a spilled body keeps in memory, so that
// Prefix needs no file access for sniffing.
const headLen = SniffLen

// BodyOptions configures ReadBody.
type BodyOptions struct {
	// MemLimit is the largest body kept in memory; a larger one is spilled
	// to a temporary file. 0 means DefaultMemLimit.
	MemLimit int
	// MaxBytes caps the bytes kept; 0 (or less) means no cap. ReadBody reads
	// at most MaxBytes+1 bytes: when there is more, the body holds the first
	// MaxBytes bytes and Truncated reports it.
	MaxBytes int64
	// TempDir is where larger bodies are spilled; "" means os.TempDir().
	TempDir string
	// SizeHint is the body's expected size (a Content-Length), or 0 or
	// less when unknown: a body that fits in memory is then read into one
	// buffer of that size instead of a doubling one. A wrong hint costs a
	// regrowth, nothing else.
	SizeHint int64
}

// Body is a fetched document body, kept in memory or in a temporary file,
// that any number of readers can read from the start. A Body's methods may be
// called concurrently. Close it to remove the temporary file.
type Body struct {
	size      int64
	truncated bool
	sum64     uint64
	sha1      [20]byte

	mem  []byte   // the whole body when it stays in memory
	head []byte   // the first headLen bytes when spilled
	file *os.File // the spilled body, nil when in memory

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// ReadBody reads r until EOF or until the MaxBytes cap and returns the body.
// It reads in chunks: memory use stays about MemLimit however long the body
// is. On a read error (a timeout, a reset connection, a corrupt gzip stream)
// it removes any temporary file and returns the error, which wraps r's.
func ReadBody(r io.Reader, opt BodyOptions) (*Body, error) {
	memLimit := opt.MemLimit
	if memLimit <= 0 {
		memLimit = DefaultMemLimit
	}
	if opt.MaxBytes > 0 {
		r = io.LimitReader(r, opt.MaxBytes+1)
	}
	br := bodyReader{
		r:        r,
		hint:     opt.SizeHint,
		memLimit: memLimit,
		maxBytes: opt.MaxBytes,
		tempDir:  opt.TempDir,
		xx:       xxhash.New(),
		sha:      sha1.New(),
	}
	b, err := br.read()
	if err != nil {
		br.discard()
		return nil, err
	}
	return b, nil
}

// bodyReader is the state of one ReadBody call.
type bodyReader struct {
	r        io.Reader
	hint     int64
	memLimit int
	maxBytes int64
	tempDir  string

	xx  *xxhash.Digest
	sha hash.Hash

	buf       []byte // the body while in memory, then the chunk buffer
	head      []byte
	file      *os.File
	size      int64 // bytes kept
	truncated bool
}

// read fills buf up to memLimit+1 bytes; past memLimit it spills to a file
// and reuses buf as the chunk buffer.
func (br *bodyReader) read() (*Body, error) {
	first := 4096
	if br.hint > 0 && br.hint <= int64(br.memLimit) {
		first = int(br.hint) + 1 // +1: the read that finds EOF needs room
	}
	br.buf = make([]byte, 0, min(first, br.memLimit+1))
	for {
		if len(br.buf) == cap(br.buf) {
			if br.file == nil && len(br.buf) <= br.memLimit {
				// Grow geometrically, never past memLimit+1: one byte more
				// than memLimit tells that the body does not fit.
				nb := make([]byte, len(br.buf), min(2*cap(br.buf), br.memLimit+1))
				copy(nb, br.buf)
				br.buf = nb
			} else {
				if err := br.spill(); err != nil {
					return nil, err
				}
			}
		}
		start := len(br.buf)
		n, err := br.r.Read(br.buf[start:cap(br.buf)])
		if n > 0 {
			br.buf = br.buf[:start+n]
			br.keep(start)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read body: %w", err)
		}
	}
	if br.file != nil || len(br.buf) > br.memLimit {
		if err := br.spill(); err != nil {
			return nil, err
		}
	}
	b := &Body{
		size:      br.size,
		truncated: br.truncated,
		sum64:     br.xx.Sum64(),
		head:      br.head,
		file:      br.file,
	}
	copy(b.sha1[:], br.sha.Sum(nil))
	if br.file == nil {
		b.mem = br.buf
	}
	return b, nil
}

// keep accounts for the bytes buf[start:] just read: it drops what is past
// maxBytes (the byte that tells the body was truncated) and hashes the rest.
func (br *bodyReader) keep(start int) {
	n := int64(len(br.buf) - start)
	if br.maxBytes > 0 && br.size+n > br.maxBytes {
		n = br.maxBytes - br.size
		br.buf = br.buf[:start+int(n)]
		br.truncated = true
	}
	br.size += n
	br.xx.Write(br.buf[start:])
	br.sha.Write(br.buf[start:])
}

// spill writes buf to the temporary file, creating it first, and empties buf.
func (br *bodyReader) spill() error {
	if br.file == nil {
		f, err := os.CreateTemp(br.tempDir, "redcrawl-body-*")
		if err != nil {
			return fmt.Errorf("spill body: %w", err)
		}
		br.file = f
		br.head = bytes.Clone(br.buf[:min(len(br.buf), headLen)])
	}
	if _, err := br.file.Write(br.buf); err != nil {
		return fmt.Errorf("spill body: %w", err)
	}
	br.buf = br.buf[:0]
	return nil
}

// discard removes the temporary file after a failed read.
func (br *bodyReader) discard() {
	if br.file != nil {
		br.file.Close()
		os.Remove(br.file.Name())
		br.file = nil
	}
}

// Size is the number of bytes kept: at most MaxBytes.
func (b *Body) Size() int64 { return b.size }

// Truncated reports that the body was longer than MaxBytes and was cut.
func (b *Body) Truncated() bool { return b.truncated }

// InMemory reports that the body is held in memory rather than in a file.
func (b *Body) InMemory() bool { return b.file == nil }

// Checksum is the 64-bit xxhash of the kept bytes (Checksum64 of Bytes).
func (b *Body) Checksum() uint64 { return b.sum64 }

// SHA1 is the SHA-1 digest of the kept bytes.
func (b *Body) SHA1() [20]byte { return b.sha1 }

// NewReader returns a new reader of the body from its first byte. Readers
// are independent and may be used concurrently. A reader of a spilled body
// fails once the body is closed.
func (b *Body) NewReader() *io.SectionReader {
	if b.file == nil {
		return io.NewSectionReader(bytes.NewReader(b.mem), 0, b.size)
	}
	return io.NewSectionReader(b.file, 0, b.size)
}

// Prefix returns the first n bytes of the body (fewer when the body is
// shorter), for sniffing. It must not be modified. For a spilled body, the
// first SniffLen bytes are kept in memory; a longer prefix is read from the file into
// a new slice, and when that read fails (the body is closed) Prefix returns
// the bytes it has.
func (b *Body) Prefix(n int) []byte {
	n = int(min(int64(max(n, 0)), b.size))
	if b.file == nil {
		return b.mem[:n:n]
	}
	if n <= len(b.head) {
		return b.head[:n:n]
	}
	p := make([]byte, n)
	m, _ := b.file.ReadAt(p, 0)
	return p[:m]
}

// Bytes returns the whole body. For a body in memory it is the Body's own
// slice, which must not be modified; a spilled body is read from its file
// into a new slice of Size bytes, so Bytes allocates as much as the body is
// long: prefer NewReader for large bodies.
func (b *Body) Bytes() ([]byte, error) {
	if b.file == nil {
		return b.mem[:len(b.mem):len(b.mem)], nil
	}
	p := make([]byte, b.size)
	if _, err := b.file.ReadAt(p, 0); err != nil && !(errors.Is(err, io.EOF) && b.size == 0) {
		return nil, fmt.Errorf("read spilled body: %w", err)
	}
	return p, nil
}

// Close removes the temporary file of a spilled body. It may be called more
// than once; later calls return the first call's result.
func (b *Body) Close() error {
	b.closeOnce.Do(func() {
		b.closed.Store(true)
		if b.file == nil {
			return
		}
		err := b.file.Close()
		if rerr := os.Remove(b.file.Name()); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			b.closeErr = fmt.Errorf("close body: %w", err)
		}
	})
	return b.closeErr
}

// Checksum64 is the crawler's content checksum of p, the 64-bit xxhash
// (XXH64, seed 0) that Body.Checksum computes while reading.
func Checksum64(p []byte) uint64 { return xxhash.Sum64(p) }
