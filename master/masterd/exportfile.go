package masterd

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/redcrawl/redcrawl/shared/config"
)

// ExportFile is an output file of Export, opened before the export runs
// (OpenExport), so that a path that cannot be written fails before a
// crawl, and written by Write: master crawl -o and master export -o share
// it. A file replaced is written beside it and renamed over it once
// complete, so an export that fails or is stopped leaves the old file as
// it was; a file appended to is continued as its format needs.
type ExportFile struct {
	path   string
	format string
	append bool
	f      *os.File // the temporary file, or the file appended to
	cut    int64    // appending: where the file is cut before the export (-1: nowhere)
	// newline: appending to JSON Lines or CSV whose last line lacks its
	// newline, which is written first
	newline bool
	cont    continuation
	done    bool // Write ran
}

// OpenExport opens path for an export in format (jsonl, json or csv):
// replaced, or with appendTo continued. A file appended to must hold what
// an export of that format writes: a JSON array, or CSV whose header
// gives the columns of the rows appended (every field of the items must
// be one); an empty or missing one is written whole.
func OpenExport(path, format string, appendTo bool) (*ExportFile, error) {
	switch format {
	case "jsonl", "json", "csv":
	default:
		return nil, fmt.Errorf("export: unknown format %q (jsonl, json or csv)", format)
	}
	e := &ExportFile{path: path, format: format, append: appendTo, cut: -1}
	if !appendTo {
		f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
		if err != nil {
			return nil, err
		}
		e.f = f
		return e, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	e.f = f
	if err := e.prepare(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return e, nil
}

// prepare reads what the file appended to holds (continuation): the end
// of a JSON array, the header of a CSV file, whether the last line has
// its newline.
func (e *ExportFile) prepare() error {
	fi, err := e.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	end, last, err := lastNonSpace(e.f, size)
	if err != nil || end < 0 {
		e.cut = 0 // empty, or only white space: written whole
		return err
	}
	e.cont.on = true
	switch e.format {
	case "json":
		first, err := firstNonSpace(e.f)
		if err != nil {
			return err
		}
		if first != '[' || last != ']' {
			return errors.New("not a JSON array: --append adds to a .json file that an export wrote")
		}
		// cut after what comes before the closing bracket: the last item,
		// or the opening bracket
		before, b, err := lastNonSpace(e.f, end)
		if err != nil {
			return err
		}
		e.cut = before + 1
		e.cont.arrayItems = b != '['
	case "csv":
		if _, err := e.f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		h, err := csv.NewReader(bufio.NewReader(e.f)).Read()
		if err != nil {
			return fmt.Errorf("read its CSV header: %w", err)
		}
		e.cont.header = h
	}
	if e.format != "json" {
		// a last line without its newline gets one
		b := make([]byte, 1)
		if _, err := e.f.ReadAt(b, size-1); err != nil {
			return err
		}
		e.newline = b[0] != '\n'
	}
	return nil
}

// Write exports the items of opt (Export) to the file, then renames it
// over the file replaced or syncs the file appended to.
func (e *ExportFile) Write(ctx context.Context, cfg *config.Config, opt ExportOptions) (int, error) {
	if e.done {
		return 0, errors.New("export file written already")
	}
	e.done = true
	opt.Format, opt.cont = e.format, e.cont
	w := &firstWrite{w: e.f}
	if e.append {
		// the file appended to is changed only once the export writes:
		// one refused before (an unknown crawl) leaves it whole
		w.prep = func() error {
			if e.cut >= 0 {
				if err := e.f.Truncate(e.cut); err != nil {
					return err
				}
			}
			if _, err := e.f.Seek(0, io.SeekEnd); err != nil {
				return err
			}
			if e.newline {
				_, err := e.f.Write([]byte{'\n'})
				return err
			}
			return nil
		}
	}
	n, err := Export(ctx, cfg, opt, w)
	if err == nil {
		err = e.f.Sync()
	}
	if cerr := e.f.Close(); err == nil {
		err = cerr
	}
	if e.append {
		return n, err
	}
	if err == nil {
		if err = os.Chmod(e.f.Name(), 0o644); err == nil {
			err = os.Rename(e.f.Name(), e.path)
		}
	}
	if err != nil {
		os.Remove(e.f.Name())
	}
	return n, err
}

// Abort leaves the file as it was, unless Write ran: a file to replace
// is not written.
func (e *ExportFile) Abort() {
	if e.done {
		return
	}
	e.done = true
	e.f.Close()
	if !e.append {
		os.Remove(e.f.Name())
	}
}

// firstWrite runs prep before its first write to w.
type firstWrite struct {
	w    io.Writer
	prep func() error
}

func (f *firstWrite) Write(p []byte) (int, error) {
	if f.prep != nil {
		prep := f.prep
		f.prep = nil
		if err := prep(); err != nil {
			return 0, err
		}
	}
	return f.w.Write(p)
}

// isSpace is JSON's white space.
func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// lastNonSpace finds the last byte that is not white space before offset
// end: its offset (-1 when none) and value.
func lastNonSpace(f *os.File, end int64) (int64, byte, error) {
	buf := make([]byte, 4096)
	for end > 0 {
		n := min(int64(len(buf)), end)
		if _, err := f.ReadAt(buf[:n], end-n); err != nil {
			return 0, 0, err
		}
		for i := n - 1; i >= 0; i-- {
			if !isSpace(buf[i]) {
				return end - n + i, buf[i], nil
			}
		}
		end -= n
	}
	return -1, 0, nil
}

// firstNonSpace returns the first byte that is not white space (0: none).
func firstNonSpace(f *os.File) (byte, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	r := bufio.NewReader(f)
	for {
		b, err := r.ReadByte()
		if errors.Is(err, io.EOF) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if !isSpace(b) {
			return b, nil
		}
	}
}
