package warc

// The spool: a body held in memory, then in a temporary file, until its
// records are written.

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// spool holds a body until it is written: in buf up to spoolMemLimit, then
// in a temporary file that is unlinked at once where the OS allows it.
type spool struct {
	dir     string
	buf     *bytes.Buffer
	f       *os.File
	removed bool
}

func (s *spool) Write(p []byte) (int, error) {
	if s.f == nil && s.buf.Len()+len(p) > spoolMemLimit {
		if err := s.toFile(); err != nil {
			return 0, err
		}
	}
	if s.f != nil {
		return s.f.Write(p)
	}
	return s.buf.Write(p)
}

// toFile moves the spool to a temporary file.
func (s *spool) toFile() error {
	f, err := os.CreateTemp(s.dir, ".spool-*.tmp")
	if err != nil {
		return fmt.Errorf("spool body: %w", err)
	}
	s.f = f
	s.removed = os.Remove(f.Name()) == nil // fails on Windows; retried in release
	if s.buf != nil && s.buf.Len() > 0 {
		if _, err := s.f.Write(s.buf.Bytes()); err != nil {
			return fmt.Errorf("spool body: %w", err)
		}
		s.buf.Reset()
	}
	return nil
}

// reader returns the spooled body from its start.
func (s *spool) reader() (io.Reader, error) {
	if s.f == nil {
		return bytes.NewReader(s.buf.Bytes()), nil
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("spool body: rewind: %w", err)
	}
	return s.f, nil
}

func (s *spool) release(w *Writer) {
	if s.f != nil {
		s.f.Close()
		if !s.removed {
			os.Remove(s.f.Name())
		}
	}
	if s.buf != nil && s.buf.Cap() <= 2*spoolMemLimit {
		s.buf.Reset()
		w.bufs.Put(s.buf)
	}
}
