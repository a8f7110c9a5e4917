package content

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// randomBytes returns n deterministic pseudo-random bytes.
func randomBytes(n int) []byte {
	p := make([]byte, n)
	rand.NewChaCha8([32]byte{1, 2, 3}).Read(p)
	return p
}

// tempFiles lists the files in dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read temp dir: %v", err)
	}
	names := []string{}
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// bodyFacts is what a test observes of a Body.
type bodyFacts struct {
	Size      int64
	Truncated bool
	InMemory  bool
	SumOK     bool // Checksum and SHA1 match the kept bytes
	BytesOK   bool // Bytes, NewReader and Prefix give the kept bytes
	TempFiles int
}

func factsOf(t *testing.T, b *Body, want []byte, dir string) bodyFacts {
	t.Helper()
	got, err := b.Bytes()
	if err != nil {
		t.Fatalf("Bytes: %v", err)
	}
	read, err := io.ReadAll(b.NewReader())
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	prefixOK := true
	for _, n := range []int{0, 1, 100, SniffLen, headLen + 1, len(want) + 10} {
		if !bytes.Equal(b.Prefix(n), want[:min(n, len(want))]) {
			prefixOK = false
		}
	}
	return bodyFacts{
		Size:      b.Size(),
		Truncated: b.Truncated(),
		InMemory:  b.InMemory(),
		SumOK:     b.Checksum() == Checksum64(want) && b.SHA1() == sha1.Sum(want),
		BytesOK:   bytes.Equal(got, want) && bytes.Equal(read, want) && prefixOK,
		TempFiles: len(tempFiles(t, dir)),
	}
}

func TestReadBodyMemLimit(t *testing.T) {
	const limit = 1000
	readers := map[string]func([]byte) io.Reader{
		"whole":    func(p []byte) io.Reader { return bytes.NewReader(p) },
		"half":     func(p []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(p)) },
		"one-byte": func(p []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(p)) },
		"data-eof": func(p []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(p)) },
	}
	tests := []struct {
		size int
		want bodyFacts
	}{
		{0, bodyFacts{Size: 0, InMemory: true, SumOK: true, BytesOK: true}},
		{1, bodyFacts{Size: 1, InMemory: true, SumOK: true, BytesOK: true}},
		{limit - 1, bodyFacts{Size: limit - 1, InMemory: true, SumOK: true, BytesOK: true}},
		{limit, bodyFacts{Size: limit, InMemory: true, SumOK: true, BytesOK: true}},
		{limit + 1, bodyFacts{Size: limit + 1, InMemory: false, SumOK: true, BytesOK: true, TempFiles: 1}},
		{5 * limit, bodyFacts{Size: 5 * limit, InMemory: false, SumOK: true, BytesOK: true, TempFiles: 1}},
	}
	// a size hint (Content-Length) that is right, short, long or absent
	// changes nothing but the buffer's first size
	hints := map[string]func(size int) int64{
		"no hint": func(int) int64 { return 0 },
		"exact":   func(n int) int64 { return int64(n) },
		"short":   func(n int) int64 { return int64(n / 2) },
		"long":    func(n int) int64 { return int64(n)*2 + 1 },
		"unknown": func(int) int64 { return -1 },
	}
	for _, tt := range tests {
		for rname, mk := range readers {
			for hname, hint := range hints {
				rname := rname + ", " + hname
				data := randomBytes(tt.size)
				dir := t.TempDir()
				b, err := ReadBody(mk(data), BodyOptions{MemLimit: limit, TempDir: dir, SizeHint: hint(tt.size)})
				if err != nil {
					t.Fatalf("size %d, %s: ReadBody: %v", tt.size, rname, err)
				}
				if diff := cmp.Diff(tt.want, factsOf(t, b, data, dir)); diff != "" {
					t.Errorf("size %d, %s: body (-want +got):\n%s", tt.size, rname, diff)
				}
				if err := b.Close(); err != nil {
					t.Errorf("size %d, %s: Close: %v", tt.size, rname, err)
				}
				if files := tempFiles(t, dir); len(files) != 0 {
					t.Errorf("size %d, %s: after Close, temp files %v", tt.size, rname, files)
				}
			}
		}
	}
}

func TestReadBodyDefaultMemLimit(t *testing.T) {
	for _, tt := range []struct {
		size     int
		inMemory bool
	}{{DefaultMemLimit, true}, {DefaultMemLimit + 1, false}} {
		b, err := ReadBody(bytes.NewReader(randomBytes(tt.size)), BodyOptions{TempDir: t.TempDir()})
		if err != nil {
			t.Fatalf("ReadBody: %v", err)
		}
		if b.InMemory() != tt.inMemory {
			t.Errorf("size %d: InMemory = %v, want %v", tt.size, b.InMemory(), tt.inMemory)
		}
		b.Close()
	}
}

func TestReadBodyMaxBytes(t *testing.T) {
	const maxBytes = 100
	tests := []struct {
		size, memLimit int
		want           bodyFacts
	}{
		{99, 1000, bodyFacts{Size: 99, InMemory: true, SumOK: true, BytesOK: true}},
		{100, 1000, bodyFacts{Size: 100, InMemory: true, SumOK: true, BytesOK: true}},
		{101, 1000, bodyFacts{Size: 100, Truncated: true, InMemory: true, SumOK: true, BytesOK: true}},
		{100000, 1000, bodyFacts{Size: 100, Truncated: true, InMemory: true, SumOK: true, BytesOK: true}},
		// MaxBytes equal to MemLimit: the extra byte does not spill.
		{101, 100, bodyFacts{Size: 100, Truncated: true, InMemory: true, SumOK: true, BytesOK: true}},
		{100, 50, bodyFacts{Size: 100, InMemory: false, SumOK: true, BytesOK: true, TempFiles: 1}},
		{101, 50, bodyFacts{Size: 100, Truncated: true, InMemory: false, SumOK: true, BytesOK: true, TempFiles: 1}},
		{100000, 50, bodyFacts{Size: 100, Truncated: true, InMemory: false, SumOK: true, BytesOK: true, TempFiles: 1}},
	}
	for _, tt := range tests {
		data := randomBytes(tt.size)
		dir := t.TempDir()
		src := &countingReader{r: bytes.NewReader(data)}
		b, err := ReadBody(src, BodyOptions{MemLimit: tt.memLimit, MaxBytes: maxBytes, TempDir: dir})
		if err != nil {
			t.Fatalf("size %d, mem %d: ReadBody: %v", tt.size, tt.memLimit, err)
		}
		if diff := cmp.Diff(tt.want, factsOf(t, b, data[:min(tt.size, maxBytes)], dir)); diff != "" {
			t.Errorf("size %d, mem %d: body (-want +got):\n%s", tt.size, tt.memLimit, diff)
		}
		if src.n > maxBytes+1 {
			t.Errorf("size %d, mem %d: read %d bytes from the source, want at most %d", tt.size, tt.memLimit, src.n, maxBytes+1)
		}
		b.Close()
	}
}

func TestReadBodySpillsLargeBody(t *testing.T) {
	data := randomBytes(20 << 20)
	dir := t.TempDir()
	b, err := ReadBody(bytes.NewReader(data), BodyOptions{TempDir: dir})
	if err != nil {
		t.Fatalf("ReadBody: %v", err)
	}
	defer b.Close()
	want := bodyFacts{Size: int64(len(data)), InMemory: false, SumOK: true, BytesOK: true, TempFiles: 1}
	if diff := cmp.Diff(want, factsOf(t, b, data, dir)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}

	// Two readers at once, twice, each from the start.
	for round := range 2 {
		var wg sync.WaitGroup
		sums := make([]uint64, 2)
		errs := make([]error, 2)
		for i := range sums {
			wg.Go(func() {
				p, err := io.ReadAll(b.NewReader())
				sums[i], errs[i] = Checksum64(p), err
			})
		}
		wg.Wait()
		if diff := cmp.Diff([]uint64{b.Checksum(), b.Checksum()}, sums); diff != "" || errs[0] != nil || errs[1] != nil {
			t.Errorf("round %d: concurrent reads: errors %v, checksums (-want +got):\n%s", round, errs, diff)
		}
	}

	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if files := tempFiles(t, dir); len(files) != 0 {
		t.Errorf("after Close, temp files %v", files)
	}
	if _, err := io.ReadAll(b.NewReader()); err == nil {
		t.Errorf("reading a closed spilled body succeeded")
	}
	if _, err := b.Bytes(); err == nil {
		t.Errorf("Bytes of a closed spilled body succeeded")
	}
	if _, _, err := DecodeHTML(b, ""); err == nil {
		t.Errorf("DecodeHTML of a closed spilled body succeeded")
	}
}

// TestReadBodyGzipBomb feeds ReadBody the decompression of a gzip stream of
// 1 GiB of zeros, compressed as it is read (through a pipe), so the stream
// is built only as far as ReadBody reads it.
func TestReadBodyGzipBomb(t *testing.T) {
	const (
		bombSize = 1 << 30
		maxBytes = 10 << 20
	)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		zw := gzip.NewWriter(pw)
		zeros := make([]byte, 64<<10)
		var err error
		for n := 0; n < bombSize && err == nil; n += len(zeros) {
			_, err = zw.Write(zeros)
		}
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
		done <- err
	}()
	compressed := &countingReader{r: pr}
	zr, err := gzip.NewReader(compressed)
	if err != nil {
		t.Fatalf("gzip reader: %v", err)
	}
	dir := t.TempDir()
	b, err := ReadBody(zr, BodyOptions{MaxBytes: maxBytes, TempDir: dir})
	pr.Close() // stop the compressor
	if werr := <-done; !errors.Is(werr, io.ErrClosedPipe) {
		t.Errorf("compressor ended with %v, want it stopped by the closed pipe", werr)
	}
	if err != nil {
		t.Fatalf("ReadBody: %v", err)
	}
	type facts struct {
		Truncated, InMemory bool
		Size                int64
		Checksum            uint64
		TempFiles           int
	}
	want := facts{Truncated: true, Size: maxBytes, Checksum: Checksum64(make([]byte, maxBytes)), TempFiles: 1}
	got := facts{b.Truncated(), b.InMemory(), b.Size(), b.Checksum(), len(tempFiles(t, dir))}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	// The compressor is at most a few blocks ahead: far less than 1 GiB
	// of zeros compresses to (about 1 MiB).
	if compressed.n > 256<<10 {
		t.Errorf("read %d compressed bytes for %d bytes kept, want far fewer", compressed.n, maxBytes)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if files := tempFiles(t, dir); len(files) != 0 {
		t.Errorf("after Close, temp files %v", files)
	}
}

func TestReadBodyErrorCleansUp(t *testing.T) {
	errTimeout := errors.New("i/o timeout")
	tests := []struct {
		name   string
		before int // bytes read before the error
	}{
		{"at once", 0},
		{"in memory", 500},
		{"after spilling", 200 << 10},
		{"large", 3 << 20},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		r := io.MultiReader(bytes.NewReader(randomBytes(tt.before)), iotest.ErrReader(errTimeout))
		b, err := ReadBody(r, BodyOptions{TempDir: dir})
		if !errors.Is(err, errTimeout) || b != nil {
			t.Errorf("%s: ReadBody = %v, %v; want nil, an error wrapping %v", tt.name, b, err, errTimeout)
		}
		if files := tempFiles(t, dir); len(files) != 0 {
			t.Errorf("%s: temp files left %v", tt.name, files)
		}
	}
}

func TestReadBodyBadTempDir(t *testing.T) {
	missing := t.TempDir() + "/missing"
	_, err := ReadBody(bytes.NewReader(randomBytes(100)), BodyOptions{MemLimit: 10, TempDir: missing})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadBody into a missing temp dir: %v, want an error wrapping os.ErrNotExist", err)
	}
}

func TestChecksum64(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
	}{
		{"", 0xef46db3751d8e999}, // XXH64 of nothing, seed 0
	}
	for _, tt := range tests {
		if got := Checksum64([]byte(tt.in)); got != tt.want {
			t.Errorf("Checksum64(%q) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
	data := randomBytes(100 << 10)
	b, err := ReadBody(iotest.HalfReader(bytes.NewReader(data)), BodyOptions{MemLimit: 1 << 10, TempDir: t.TempDir()})
	if err != nil {
		t.Fatalf("ReadBody: %v", err)
	}
	defer b.Close()
	if b.Checksum() != Checksum64(data) {
		t.Errorf("Body.Checksum = %#x, Checksum64 = %#x", b.Checksum(), Checksum64(data))
	}
}
