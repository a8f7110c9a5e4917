package warc

// Records: one gzip member each (version line, fields, block), the checks
// that keep them valid, record ids and digests.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/netip"
	"strings"
)

type field struct{ name, value string }

// writeRecord writes one record as one gzip member of the current file:
// version line, the non-empty fields, CRLF, the block, CRLF CRLF. Called
// with w.mu held.
func (w *Writer) writeRecord(fields []field, block ...io.Reader) error {
	w.hdr.Reset()
	w.hdr.WriteString(version)
	for _, f := range fields {
		if f.value != "" {
			w.hdr.WriteString(f.name)
			w.hdr.WriteString(": ")
			w.hdr.WriteString(f.value)
			w.hdr.WriteString("\r\n")
		}
	}
	w.hdr.WriteString("\r\n")
	w.gz.Reset(w.cur)
	if _, err := w.gz.Write(w.hdr.Bytes()); err != nil {
		return err
	}
	for _, r := range block {
		// Hide any WriterTo so that w.cbuf is used (os.File's WriteTo
		// would allocate its own buffer).
		if _, err := io.CopyBuffer(w.gz, struct{ io.Reader }{r}, w.cbuf); err != nil {
			return err
		}
	}
	if _, err := w.gz.Write([]byte("\r\n\r\n")); err != nil {
		return err
	}
	return w.gz.Close()
}

// checkExchange rejects what would make an invalid record.
func checkExchange(x *Exchange) error {
	if x.TargetURI == "" {
		return errors.New("empty TargetURI")
	}
	if i := strings.IndexFunc(x.TargetURI, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		return fmt.Errorf("TargetURI contains space or control character %#x", x.TargetURI[i])
	}
	if x.IP != "" {
		if _, err := netip.ParseAddr(x.IP); err != nil {
			return fmt.Errorf("bad IP: %w", err)
		}
	}
	if !bytes.HasPrefix(x.ResponseHeader, []byte("HTTP/")) {
		return errors.New("ResponseHeader does not start with a status line")
	}
	if i := bytes.Index(x.ResponseHeader, []byte("\r\n\r\n")); i < 0 || i != len(x.ResponseHeader)-4 {
		return errors.New("ResponseHeader does not end with its only CRLF CRLF")
	}
	if len(x.Request) > 0 && !bytes.Contains(x.Request, []byte("\r\n\r\n")) {
		return errors.New("Request has no CRLF CRLF after its headers")
	}
	if x.Body == nil {
		x.Body = bytes.NewReader(nil)
	}
	if x.Profile != "" && x.Profile != ProfileServerNotModified && x.Profile != ProfileIdenticalPayloadDigest {
		return fmt.Errorf("unknown revisit Profile %q", x.Profile)
	}
	if i := strings.IndexFunc(x.RefersToURI, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
		return fmt.Errorf("RefersToURI contains space or control character %#x", x.RefersToURI[i])
	}
	if x.BodySize < -1 {
		return fmt.Errorf("bad BodySize %d", x.BodySize)
	}
	return nil
}

// checkValue rejects control characters, which would break a header or a
// warc-fields line.
func checkValue(what, v string) error {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%s contains control character %#x", what, c)
		}
	}
	return nil
}

// newRecordID returns "<urn:uuid:...>" with a random (version 4) UUID.
func newRecordID() string {
	var u [16]byte
	rand.Read(u[:]) // never fails (crypto/rand panics rather than fail)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], u[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], u[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], u[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], u[8:10])
	s[23] = '-'
	hex.Encode(s[24:], u[10:])
	return "<urn:uuid:" + string(s[:]) + ">"
}

func digest(h hash.Hash) string {
	return "sha1:" + base32.StdEncoding.EncodeToString(h.Sum(nil))
}

func digestOf(b []byte) string {
	sum := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}
