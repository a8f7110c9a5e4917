package content

import (
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// AcceptEncoding is the Accept-Encoding request header of the crawler's
// fetches: the content codings NewDecoder decodes that servers commonly
// send (deflate is decoded when sent unasked, but not asked for: servers
// disagree on what it means).
const AcceptEncoding = "gzip, br, zstd"

// ZstdMaxWindow is the largest zstd window NewDecoder accepts, 8 MiB: the
// limit RFC 9659 sets for the zstd content coding on the web (browsers
// refuse larger ones). A zstd decoder's memory is about its window, so this
// bounds a zstd response's decoding memory whatever the frame header says;
// a larger window is a decoding error.
const ZstdMaxWindow = 8 << 20

// maxCodings bounds the codings of one Content-Encoding ("gzip, br"): a
// longer chain is refused rather than stacked.
const maxCodings = 3

// ErrUnsupportedEncoding is returned by NewDecoder for a content coding it
// does not know.
var ErrUnsupportedEncoding = errors.New("unsupported content encoding")

// NewDecoder returns a reader of r decoded as the Content-Encoding header
// value says: "gzip" (or "x-gzip"), "deflate" (zlib), "br" (brotli),
// "zstd", "identity" or "", or a comma-separated list of these, applied in
// the order listed (so decoded last to first). Every decoder streams: its
// memory is bounded (gzip and deflate 32 KiB windows, brotli's at most 16
// MiB, zstd's ZstdMaxWindow) however large the decoded body, so a caller
// that caps the bytes it reads (ReadBody's MaxBytes) reads a compression
// bomb up to the cap with bounded memory. decoded reports whether any
// decoding happens. Closing the reader releases the decoders, not r.
func NewDecoder(r io.Reader, contentEncoding string) (rc io.ReadCloser, decoded bool, err error) {
	var codings []string
	for c := range strings.SplitSeq(contentEncoding, ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		if c != "" && c != "identity" {
			codings = append(codings, c)
		}
	}
	if len(codings) == 0 {
		return io.NopCloser(r), false, nil
	}
	if len(codings) > maxCodings {
		return nil, false, fmt.Errorf("%w: %d codings %q", ErrUnsupportedEncoding, len(codings), contentEncoding)
	}
	d := &decoder{r: r}
	for i := len(codings) - 1; i >= 0; i-- {
		if err := d.push(codings[i]); err != nil {
			d.Close()
			return nil, false, err
		}
	}
	return d, true, nil
}

// decoder is a chain of decoding readers.
type decoder struct {
	r       io.Reader
	closers []func()
}

func (d *decoder) Read(p []byte) (int, error) { return d.r.Read(p) }

// Close releases the decoders (the zstd decoder's buffers and goroutines).
func (d *decoder) Close() error {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
	return nil
}

// push adds a decoder of coding c over the current reader.
func (d *decoder) push(c string) error {
	switch c {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(d.r)
		if err != nil {
			return fmt.Errorf("gzip body: %w", err)
		}
		d.r = zr
		d.closers = append(d.closers, func() { zr.Close() })
	case "deflate":
		zr, err := zlib.NewReader(d.r)
		if err != nil {
			return fmt.Errorf("deflate body: %w", err)
		}
		d.r = zr
		d.closers = append(d.closers, func() { zr.Close() })
	case "br":
		d.r = brotli.NewReader(d.r)
	case "zstd":
		zr, err := zstd.NewReader(d.r,
			zstd.WithDecoderConcurrency(1), // no goroutines of its own
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(ZstdMaxWindow),
			zstd.WithDecoderMaxMemory(ZstdMaxWindow))
		if err != nil {
			return fmt.Errorf("zstd body: %w", err)
		}
		d.r = zstdReader{zr}
		d.closers = append(d.closers, zr.Close)
	default:
		return fmt.Errorf("%w %q", ErrUnsupportedEncoding, c)
	}
	return nil
}

// zstdReader names the decoding error of a zstd body.
type zstdReader struct{ d *zstd.Decoder }

func (z zstdReader) Read(p []byte) (int, error) {
	n, err := z.d.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("zstd body: %w", err)
	}
	return n, err
}
