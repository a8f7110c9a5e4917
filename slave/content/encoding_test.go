package content

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"
)

// encoders make the writers of the content codings, for tests.
var encoders = map[string]func(w io.Writer) (io.WriteCloser, error){
	"gzip": func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriter(w), nil },
	"deflate": func(w io.Writer) (io.WriteCloser, error) {
		return zlib.NewWriter(w), nil
	},
	"br": func(w io.Writer) (io.WriteCloser, error) { return brotli.NewWriterLevel(w, 1), nil },
	"zstd": func(w io.Writer) (io.WriteCloser, error) {
		return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(1<<20))
	},
}

// encode compresses p with the codings of a Content-Encoding value, in
// order.
func encode(t *testing.T, p []byte, contentEncoding string) []byte {
	t.Helper()
	for c := range strings.SplitSeq(contentEncoding, ",") {
		c = strings.TrimSpace(c)
		if c == "" || c == "identity" {
			continue
		}
		var b bytes.Buffer
		w, err := encoders[c](&b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(p); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		p = b.Bytes()
	}
	return p
}

func TestNewDecoder(t *testing.T) {
	page := []byte(strings.Repeat("<p>hello, compressed world</p>\n", 200))
	tests := []struct {
		encoding    string
		wantDecoded bool
		wantErr     error
	}{
		{"", false, nil},
		{"identity", false, nil},
		{"gzip", true, nil},
		{"x-gzip", true, nil},
		{"deflate", true, nil},
		{"br", true, nil},
		{"BR", true, nil},
		{"zstd", true, nil},
		{"gzip, br", true, nil},
		{"zstd,gzip", true, nil},
		{"compress", false, ErrUnsupportedEncoding},
		{"gzip, gzip, gzip, gzip", false, ErrUnsupportedEncoding},
	}
	for _, tt := range tests {
		t.Run(tt.encoding, func(t *testing.T) {
			var in []byte
			if tt.wantErr == nil {
				in = encode(t, page, strings.ToLower(strings.ReplaceAll(tt.encoding, "x-gzip", "gzip")))
			}
			rc, decoded, err := NewDecoder(bytes.NewReader(in), tt.encoding)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("NewDecoder: %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer rc.Close()
			if decoded != tt.wantDecoded {
				t.Errorf("decoded = %v, want %v", decoded, tt.wantDecoded)
			}
			got, err := io.ReadAll(rc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, page) {
				t.Errorf("decoded %d bytes, want the %d of the page", len(got), len(page))
			}
		})
	}
}

// TestNewDecoderCorrupt: a body that is not what its coding says fails the
// read (or the decoder's start), never hangs or returns garbage silently.
func TestNewDecoderCorrupt(t *testing.T) {
	junk := bytes.Repeat([]byte("not compressed at all "), 100)
	for _, c := range []string{"gzip", "deflate", "br", "zstd"} {
		rc, _, err := NewDecoder(bytes.NewReader(junk), c)
		if err == nil {
			_, err = io.ReadAll(rc)
			rc.Close()
		}
		if err == nil {
			t.Errorf("%s: junk decoded without an error", c)
		}
	}
}

// TestNewDecoderBombs feeds ReadBody, through NewDecoder, 1 GiB of zeros
// compressed in each coding as it is read (through a pipe): ReadBody stops
// at the cap, the compressor is stopped a little ahead, and the bytes
// allocated meanwhile stay far below the decoded size.
func TestNewDecoderBombs(t *testing.T) {
	const (
		bombSize = 1 << 30
		maxBytes = 4 << 20
	)
	for _, coding := range []string{"gzip", "deflate", "br", "zstd"} {
		t.Run(coding, func(t *testing.T) {
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() {
				zw, err := encoders[coding](pw)
				if err == nil {
					zeros := make([]byte, 64<<10)
					for n := 0; n < bombSize && err == nil; n += len(zeros) {
						_, err = zw.Write(zeros)
					}
					if err == nil {
						err = zw.Close()
					}
				}
				pw.CloseWithError(err)
				done <- err
			}()
			compressed := &countingReader{r: pr}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			dr, decoded, err := NewDecoder(compressed, coding)
			if err != nil {
				pr.Close()
				<-done
				t.Fatalf("NewDecoder: %v", err)
			}
			dir := t.TempDir()
			b, err := ReadBody(dr, BodyOptions{MaxBytes: maxBytes, TempDir: dir})
			dr.Close()
			runtime.ReadMemStats(&after)
			pr.Close() // stop the compressor
			if werr := <-done; !errors.Is(werr, io.ErrClosedPipe) {
				t.Errorf("compressor ended with %v, want it stopped by the closed pipe", werr)
			}
			if err != nil {
				t.Fatalf("ReadBody: %v", err)
			}
			defer b.Close()
			type facts struct {
				Decoded, Truncated bool
				Size               int64
				Checksum           uint64
			}
			want := facts{Decoded: true, Truncated: true, Size: maxBytes, Checksum: Checksum64(make([]byte, maxBytes))}
			got := facts{decoded, b.Truncated(), b.Size(), b.Checksum()}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if compressed.n > 1<<20 {
				t.Errorf("read %d compressed bytes for %d bytes kept, want far fewer", compressed.n, maxBytes)
			}
			// decoder and compressor together: their windows and buffers,
			// not the gigabyte
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 96<<20 {
				t.Errorf("%d bytes allocated reading a %d-byte bomb up to %d bytes", alloc, bombSize, maxBytes)
			}
		})
	}
}

// TestNewDecoderZstdWindow: a zstd frame asking for a window above
// ZstdMaxWindow is refused instead of allocated.
func TestNewDecoderZstdWindow(t *testing.T) {
	var b bytes.Buffer
	zw, err := zstd.NewWriter(&b, zstd.WithWindowSize(64<<20), zstd.WithEncoderConcurrency(1),
		zstd.WithSingleSegment(false))
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(bytes.Repeat([]byte("abcdefgh"), 4<<20)) // 32 MiB: the frame needs its large window
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	rc, _, err := NewDecoder(&b, "zstd")
	if err == nil {
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "zstd") {
		t.Errorf("64 MiB window: %v, want a zstd window error", err)
	}
}
