package warc

// The files: opened with their warcinfo record under an .open name, finished
// (synced, renamed) when full or closed, cut back after a failed exchange.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// file is the open file being written; it counts the compressed bytes
// handed to it, which is the file's logical size.
type file struct {
	f      *os.File
	bw     *bufio.Writer
	n      int64
	name   string // final base name
	infoID string // WARC-Record-ID of the file's warcinfo
	closed bool   // f is closed, only the rename is left
}

func (c *file) Write(p []byte) (int, error) {
	n, err := c.bw.Write(p)
	c.n += int64(n)
	return n, err
}

// open starts a new file with its warcinfo record. Called with w.mu held.
func (w *Writer) open() error {
	now := w.opt.Now().UTC()
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return fmt.Errorf("open file: random name: %w", err)
	}
	name := fmt.Sprintf("%s-%s-%05d-%s%s", w.opt.Prefix, now.Format("20060102150405"),
		w.seq, hex.EncodeToString(rnd[:]), Suffix)
	path := filepath.Join(w.opt.Dir, name+OpenSuffix)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("open file: %w", err)
	}
	w.seq++
	c := &file{f: f, bw: bufio.NewWriterSize(f, 64<<10), name: name, infoID: newRecordID()}
	if w.gz == nil {
		// The level was checked by NewWriter.
		w.gz, _ = gzip.NewWriterLevel(c, w.opt.CompressionLevel)
	}
	w.cur = c

	var info strings.Builder
	writeField := func(k, v string) {
		if v != "" {
			info.WriteString(k + ": " + v + "\r\n")
		}
	}
	writeField("software", w.opt.Software)
	writeField("format", Format)
	writeField("conformsTo", ConformsTo)
	writeField("hostname", w.hostname)
	writeField("operator", w.opt.Operator)
	block := []byte(info.String())
	fields := []field{
		{"WARC-Type", "warcinfo"},
		{"WARC-Record-ID", c.infoID},
		{"WARC-Date", now.Format(dateLayout)},
		{"WARC-Filename", name},
		{"WARC-Block-Digest", digestOf(block)},
		{"Content-Type", "application/warc-fields"},
		{"Content-Length", strconv.Itoa(len(block))},
	}
	err = w.writeRecord(fields, bytes.NewReader(block))
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		w.cur = nil
		f.Close()
		os.Remove(path)
		return fmt.Errorf("open file: write warcinfo to %s: %w", name, err)
	}
	return nil
}

// finish syncs, closes and renames the current file. Called with w.mu held.
// On error the file stays current so a later call can retry.
func (w *Writer) finish() error {
	c := w.cur
	if !c.closed {
		if err := c.bw.Flush(); err != nil {
			return fmt.Errorf("finish %s: flush: %w", c.name, err)
		}
		if err := c.f.Sync(); err != nil {
			return fmt.Errorf("finish %s: sync: %w", c.name, err)
		}
		c.closed = true
		if err := c.f.Close(); err != nil {
			return fmt.Errorf("finish %s: close: %w", c.name, err)
		}
	}
	final := filepath.Join(w.opt.Dir, c.name)
	if err := os.Rename(final+OpenSuffix, final); err != nil {
		return fmt.Errorf("finish %s: rename: %w", c.name, err)
	}
	w.cur = nil
	w.done = append(w.done, final)
	return nil
}

// rollback cuts the current file back to size after a failed exchange. If
// that fails too the Writer gives up: w.err is set. Called with w.mu held.
func (w *Writer) rollback(size int64) {
	c := w.cur
	c.bw.Reset(c.f)
	c.n = size
	if err := c.f.Truncate(size); err != nil {
		w.err = fmt.Errorf("warc: %s is damaged: truncate after failed write: %w", c.name, err)
		return
	}
	if _, err := c.f.Seek(size, io.SeekStart); err != nil {
		w.err = fmt.Errorf("warc: %s is damaged: seek after failed write: %w", c.name, err)
	}
}

// maxPrefixLen bounds Options.Prefix: with the 49 bytes the writer adds
// (-time-seq-random.warc.gz.open) a name stays far below NAME_MAX (255).
const maxPrefixLen = 128

func sanitizePrefix(p string) string {
	if p == "" {
		return "redcrawl"
	}
	b := []byte(p[:min(len(p), maxPrefixLen)])
	if b[0] == '.' {
		b[0] = '_'
	}
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}
