package testsite

// The hostile hub's payloads: the gzip bomb, the huge page, the slow page,
// and the PDF and PNG files.

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// hostileData is what the hostile pages serve that is computed once.
type hostileData struct {
	enc       []encSpec
	hugeBlock []byte // a block of HTML paragraphs that /hostile/huge repeats
	pdf, png  []byte

	bombOnce sync.Once
	bomb     []byte // the gzip bomb, built by the first request for it
	bombErr  error
}

// newHostileData encodes the pages in legacy charsets and builds the
// binary files.
func newHostileData() (*hostileData, error) {
	d := &hostileData{enc: encSpecs(), pdf: buildPDF()}
	var b bytes.Buffer
	for i := range d.enc {
		e := &d.enc[i]
		b.Reset()
		e.render(&b)
		body, err := e.enc.NewEncoder().Bytes(b.Bytes())
		if err != nil {
			return nil, fmt.Errorf("encode %s page: %w", e.charset, err)
		}
		e.body = body
	}
	png, err := buildPNG()
	if err != nil {
		return nil, err
	}
	d.png = png
	b.Reset()
	for r := newRNG(0, streamPadding, 0, 0); b.Len() < 64<<10; {
		b.WriteString("<p>")
		for i := range 16 {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.intn(len(words))])
		}
		b.WriteString(".</p>\n")
	}
	d.hugeBlock = b.Bytes()
	return d, nil
}

// bombBytes returns the gzip bomb, building it on first use.
func (d *hostileData) bombBytes() ([]byte, error) {
	d.bombOnce.Do(func() { d.bomb, d.bombErr = gzipBomb(1<<20, BombSize>>20) })
	return d.bomb, d.bombErr
}

// gzipBomb returns a single gzip member that decompresses to chunk×repeats
// zero bytes, with a correct CRC and size. The deflate blocks of one chunk,
// ended by a sync flush on a byte boundary, are repeated: their
// back-references only ever reach zeros, so any repetition decodes.
func gzipBomb(chunk, repeats int) ([]byte, error) {
	zeros := make([]byte, chunk)
	var blocks bytes.Buffer
	fw, err := flate.NewWriter(&blocks, flate.BestCompression)
	if err != nil {
		return nil, fmt.Errorf("gzip bomb: %w", err)
	}
	if _, err := fw.Write(zeros); err != nil {
		return nil, fmt.Errorf("gzip bomb: %w", err)
	}
	if err := fw.Flush(); err != nil {
		return nil, fmt.Errorf("gzip bomb: %w", err)
	}
	// Header: magic, deflate, no flags, no mtime, best compression, OS unknown.
	out := make([]byte, 0, 10+repeats*blocks.Len()+10)
	out = append(out, 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 255)
	crc := uint32(0)
	for range repeats {
		out = append(out, blocks.Bytes()...)
		crc = crc32.Update(crc, crc32.IEEETable, zeros)
	}
	out = append(out, 0x03, 0x00) // an empty final block, fixed Huffman codes
	out = binary.LittleEndian.AppendUint32(out, crc)
	out = binary.LittleEndian.AppendUint32(out, uint32(chunk*repeats)) // ISIZE is modulo 2^32
	return out, nil
}

// serveBomb answers with the gzip bomb, whatever Accept-Encoding says.
func (s *Site) serveBomb(w http.ResponseWriter, r *http.Request) {
	bomb, err := s.hostile.bombBytes()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError) // the hit says 200; never happens
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Encoding", "gzip")
	hdr.Set("Content-Length", strconv.Itoa(len(bomb)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	for len(bomb) > 0 && !s.aborted(r) { // at most len/64 KiB writes
		n := min(len(bomb), 64<<10)
		if _, err := w.Write(bomb[:n]); err != nil {
			return
		}
		bomb = bomb[n:]
	}
}

// serveHuge streams HugeSize bytes of HTML, repeating a block.
func (s *Site) serveHuge(w http.ResponseWriter, r *http.Request) {
	const head = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Huge</title>\n</head>\n<body>\n"
	const foot = "</body>\n</html>\n"
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	if _, err := w.Write([]byte(head)); err != nil {
		return
	}
	block := s.hostile.hugeBlock
	for left := HugeSize - len(head) - len(foot); left > 0; { // at most HugeSize/len(block)+1 writes
		if s.aborted(r) {
			panic(http.ErrAbortHandler) // don't end the body as if it were complete
		}
		n := min(left, len(block))
		if _, err := w.Write(block[:n]); err != nil {
			return
		}
		left -= n
	}
	_, _ = w.Write([]byte(foot))
}

// serveSlow sends the headers, then a byte every SlowInterval until the
// client goes away, the site closes or HostileMaxDuration passes.
func (s *Site) serveSlow(w http.ResponseWriter, r *http.Request) {
	const head = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Slow</title>\n</head>\n<body>\n<p>"
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(SlowInterval)
	defer tick.Stop()
	one := []byte{'.'}
	for i := range int(HostileMaxDuration / SlowInterval) {
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		case <-s.done:
			panic(http.ErrAbortHandler)
		}
		one[0] = '.'
		if i < len(head) {
			one[0] = head[i]
		}
		if _, err := w.Write(one); err != nil || rc.Flush() != nil {
			return
		}
	}
	panic(http.ErrAbortHandler) // never complete the page
}

// buildPDF returns a small valid PDF: one empty page, and a comment with
// an HTML link to /hostile/not-a-link.
func buildPDF() []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n% <a href=\"" + hostilePrefix + "not-a-link\">not a link</a>\n")
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 72 72] >>",
	}
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// buildPNG returns a valid 1x1 grey PNG with a text chunk holding an HTML
// link to /hostile/not-a-link.
func buildPNG() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data))) // writes to a bytes.Buffer don't fail
		b.WriteString(typ)
		b.Write(data)
		crc := crc32.Update(crc32.ChecksumIEEE([]byte(typ)), crc32.IEEETable, data)
		_ = binary.Write(&b, binary.BigEndian, crc)
	}
	// 1x1, 8-bit greyscale, deflate, no filter, no interlace.
	chunk("IHDR", []byte{0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0})
	chunk("tEXt", []byte("Comment\x00<a href=\""+hostilePrefix+"not-a-link\">not a link</a>"))
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	if _, err := zw.Write([]byte{0, 0x80}); err != nil { // filter none, one grey pixel
		return nil, fmt.Errorf("png: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("png: %w", err)
	}
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return b.Bytes(), nil
}
