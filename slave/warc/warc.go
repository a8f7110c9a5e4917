// Package warc writes fetched pages to WARC/1.1 files (ISO 28500:2017), the
// archive format that replay tools (pywb, OpenWayback) and WARC readers
// (warcio, jwarc) understand.
//
// Design:
//
//   - A Writer owns a directory. It writes one file at a time, named
//     <prefix>-<UTC yyyymmddhhmmss>-<seq 5 digits>-<random hex>.warc.gz.
//     While being written a file carries the extra suffix ".open"; it is
//     fsynced and renamed to its final name when it is rotated or when the
//     Writer is closed, so anything that lists the directory for *.warc.gz
//     only ever sees complete files. A file is opened lazily, at the first
//     record: a Writer that archives nothing leaves no file behind.
//   - Every file starts with a warcinfo record describing the software,
//     format and host; every other record names it in WARC-Warcinfo-ID.
//   - Every record is its own gzip member ("record-at-time compression"),
//     so a record can be read by seeking to its compressed offset and
//     decompressing one member. WriteExchange reports that offset in a
//     Location, which is what a CDX index stores.
//   - An exchange is a response record followed by its request record
//     (WARC-Concurrent-To names the response). Both go to the same file and
//     nothing else is written between them.
//   - WARC-Block-Digest must appear in the record header, before the block,
//     but the body is streamed. WriteExchange therefore first copies the
//     body into a spool (memory up to 1 MiB, then an unlinked temporary
//     file in Dir) while hashing it, and only then takes the Writer's mutex
//     to write the records. Slow bodies thus never hold up other goroutines,
//     a body that fails half way never leaves half a record in a file, and
//     memory stays bounded whatever the body size.
//   - Rotation: when, after an exchange, the file has reached MaxFileBytes
//     (compressed), it is finished and the next exchange starts a new file.
//     A file can therefore exceed MaxFileBytes by one exchange.
//   - If writing to the file fails half way, the file is truncated back to
//     the end of the last complete exchange; if even that fails the Writer
//     keeps returning the error.
package warc

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"
)

const (
	// DefaultMaxFileBytes is the rotation size used when
	// Options.MaxFileBytes is 0: 1 GiB, the size the WARC guidelines
	// recommend.
	DefaultMaxFileBytes int64 = 1 << 30

	// spoolMemLimit is how much of a body is kept in memory before the
	// spool moves to a temporary file.
	spoolMemLimit = 1 << 20

	// Suffix is the extension of a finished file; OpenSuffix is appended
	// to it while the file is being written.
	Suffix     = ".warc.gz"
	OpenSuffix = ".open"

	// Format and ConformsTo are the values of the warcinfo fields of the
	// same name.
	Format     = "WARC File Format 1.1"
	ConformsTo = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"

	version    = "WARC/1.1\r\n"
	dateLayout = "2006-01-02T15:04:05Z"
)

// ErrClosed is returned by WriteExchange after Close.
var ErrClosed = errors.New("warc: writer is closed")

// Options configure a Writer.
type Options struct {
	// Dir is where the files are written; it is created if needed.
	Dir string
	// Prefix starts every file name, e.g. the slave id. Characters other
	// than ASCII letters, digits, '.', '_' and '-' are replaced by '_', as
	// is a leading '.' (no hidden files); it is cut to maxPrefixLen bytes so
	// that file names stay within NAME_MAX; empty means "redcrawl".
	Prefix string
	// MaxFileBytes is the compressed size at which a file is rotated;
	// 0 means DefaultMaxFileBytes.
	MaxFileBytes int64
	// Software and Operator go into each file's warcinfo record
	// (Software defaults to "redcrawl"; an empty Operator is left out).
	Software string
	Operator string
	// CompressionLevel is the gzip level, from gzip.BestSpeed (1) to
	// gzip.BestCompression (9); 0 means gzip.DefaultCompression. A slow
	// slave (a Raspberry Pi) may prefer gzip.BestSpeed.
	CompressionLevel int
	// Now is the clock for file names, the warcinfo date and exchanges
	// without a Date; nil means time.Now.
	Now func() time.Time
}

// Exchange is one HTTP request and its response.
type Exchange struct {
	// TargetURI is the URI that was fetched (WARC-Target-URI).
	TargetURI string
	// Date is when the fetch started (WARC-Date); zero means Options.Now.
	// It is stored in UTC with one-second precision.
	Date time.Time
	// IP is the server's address (WARC-IP-Address); optional.
	IP string
	// Request is the raw HTTP request: request line, headers, CRLF CRLF,
	// body. Empty means no request record is written.
	Request []byte
	// ResponseHeader is the status line and headers, ending with the
	// CRLF CRLF that separates them from the body, exactly as stored.
	// If the body was transfer-decoded (chunked) the caller should drop
	// Transfer-Encoding from it, since Body is stored as given.
	ResponseHeader []byte
	// Body is the response's entity body, read to EOF.
	Body io.Reader
	// BodySize is the length of Body, or -1 if unknown. When it is known
	// a body of another length is an error (a truncated fetch).
	BodySize int64
	// Profile, when set, makes the response record a revisit record
	// (WARC/1.1 section 6.7) of that profile: ProfileServerNotModified
	// for a 304 answer to a conditional request, or
	// ProfileIdenticalPayloadDigest for a body whose digest is the one an
	// earlier record holds. Its block is the response header only; Body
	// is read for WARC-Payload-Digest (identical-payload-digest) and not
	// stored. RefersToURI and RefersToDate name the earlier capture when
	// known (WARC-Refers-To-Target-URI, WARC-Refers-To-Date).
	Profile      string
	RefersToURI  string
	RefersToDate time.Time
}

// Revisit profiles of WARC/1.1 (section 6.7.2 and 6.7.3).
const (
	ProfileServerNotModified      = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
	ProfileIdenticalPayloadDigest = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
)

// Location is where WriteExchange put the response record.
type Location struct {
	// File is the base name of the finished file (without ".open", even
	// while the file is still being written).
	File string
	// Offset is the compressed offset of the response record's gzip
	// member in File.
	Offset int64
	// Length is the compressed length of the response record's gzip
	// member only, as in a CDX index. The request record's member, if
	// any, starts at Offset+Length.
	Length int64
	// RecordID is the response's WARC-Record-ID, "<urn:uuid:...>".
	RecordID string
}

// Writer writes exchanges to rotating WARC files. It is safe for
// concurrent use.
type Writer struct {
	opt      Options
	hostname string
	bufs     sync.Pool // *bytes.Buffer for in-memory spools

	mu     sync.Mutex
	closed bool
	err    error // sticky: a file that could not be repaired
	cur    *file // nil between files
	seq    int
	done   []string
	gz     *gzip.Writer
	hdr    bytes.Buffer
	cbuf   []byte // io.CopyBuffer's buffer
}

// NewWriter returns a Writer for opt, creating opt.Dir if needed.
func NewWriter(opt Options) (*Writer, error) {
	if opt.Dir == "" {
		return nil, errors.New("warc: new writer: empty Dir")
	}
	if opt.MaxFileBytes < 0 {
		return nil, fmt.Errorf("warc: new writer: negative MaxFileBytes %d", opt.MaxFileBytes)
	}
	if opt.MaxFileBytes == 0 {
		opt.MaxFileBytes = DefaultMaxFileBytes
	}
	if opt.CompressionLevel == 0 {
		opt.CompressionLevel = gzip.DefaultCompression
	}
	if opt.CompressionLevel != gzip.DefaultCompression && (opt.CompressionLevel < gzip.BestSpeed || opt.CompressionLevel > gzip.BestCompression) {
		return nil, fmt.Errorf("warc: new writer: bad CompressionLevel %d", opt.CompressionLevel)
	}
	opt.Prefix = sanitizePrefix(opt.Prefix)
	if opt.Software == "" {
		opt.Software = "redcrawl"
	}
	if err := checkValue("Software", opt.Software); err != nil {
		return nil, fmt.Errorf("warc: new writer: %w", err)
	}
	if err := checkValue("Operator", opt.Operator); err != nil {
		return nil, fmt.Errorf("warc: new writer: %w", err)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("warc: new writer: create dir: %w", err)
	}
	host, _ := os.Hostname() // best effort: the field is left out if unknown
	if checkValue("hostname", host) != nil {
		host = ""
	}
	return &Writer{
		opt:      opt,
		hostname: host,
		bufs:     sync.Pool{New: func() any { return new(bytes.Buffer) }},
		cbuf:     make([]byte, 64<<10),
	}, nil
}

// WriteExchange stores x as a response record followed by a request record
// and returns where the response record is. The body is read before the
// Writer's lock is taken, so concurrent calls only serialise on the disk
// writes; records of different exchanges never interleave. On error
// nothing of x is left in the file.
func (w *Writer) WriteExchange(x Exchange) (Location, error) {
	if err := checkExchange(&x); err != nil {
		return Location{}, fmt.Errorf("warc: write exchange: %w", err)
	}
	date := x.Date
	if date.IsZero() {
		date = w.opt.Now()
	}

	// Spool and hash the body outside the lock.
	sp := &spool{dir: w.opt.Dir}
	defer sp.release(w)
	blockHash, payloadHash := sha1.New(), sha1.New()
	blockHash.Write(x.ResponseHeader)
	if x.BodySize > spoolMemLimit && x.Profile == "" {
		if err := sp.toFile(); err != nil {
			return Location{}, fmt.Errorf("warc: write exchange: %w", err)
		}
	} else {
		sp.buf = w.bufs.Get().(*bytes.Buffer)
		if x.BodySize > 0 {
			sp.buf.Grow(int(x.BodySize))
		}
	}
	var dst io.Writer = io.MultiWriter(sp, blockHash, payloadHash)
	if x.Profile != "" {
		dst = payloadHash // a revisit stores no payload
	}
	n, err := io.Copy(dst, x.Body)
	if err != nil {
		return Location{}, fmt.Errorf("warc: write exchange: read body: %w", err)
	}
	if x.BodySize >= 0 && n != x.BodySize {
		return Location{}, fmt.Errorf("warc: write exchange: body is %d bytes, BodySize says %d", n, x.BodySize)
	}
	body, err := sp.reader()
	if err != nil {
		return Location{}, fmt.Errorf("warc: write exchange: %w", err)
	}

	respID, reqID := newRecordID(), newRecordID()
	ts := date.UTC().Format(dateLayout)
	recType, payloadDigest, blockDigest := "response", digest(payloadHash), digest(blockHash)
	size := int64(len(x.ResponseHeader)) + n
	blocks := []io.Reader{bytes.NewReader(x.ResponseHeader), body}
	var refersDate string
	if x.Profile != "" {
		// a revisit: the header alone is the block; the payload digest
		// says which earlier payload it stands for
		recType, blockDigest, size = "revisit", digestOf(x.ResponseHeader), int64(len(x.ResponseHeader))
		blocks = blocks[:1]
		if x.Profile == ProfileServerNotModified && n == 0 {
			payloadDigest = ""
		}
		if !x.RefersToDate.IsZero() {
			refersDate = x.RefersToDate.UTC().Format(dateLayout)
		}
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return Location{}, ErrClosed
	}
	if w.err != nil {
		return Location{}, w.err
	}
	if w.cur != nil && w.cur.n >= w.opt.MaxFileBytes {
		if err := w.finish(); err != nil {
			return Location{}, fmt.Errorf("warc: write exchange: %w", err)
		}
	}
	if w.cur == nil {
		if err := w.open(); err != nil {
			return Location{}, fmt.Errorf("warc: write exchange: %w", err)
		}
	}
	c := w.cur
	start := c.n

	fields := []field{
		{"WARC-Type", recType},
		{"WARC-Record-ID", respID},
		{"WARC-Date", ts},
		{"WARC-Target-URI", x.TargetURI},
		{"WARC-IP-Address", x.IP},
		{"WARC-Warcinfo-ID", c.infoID},
		{"WARC-Profile", x.Profile},
		{"WARC-Refers-To-Target-URI", x.RefersToURI},
		{"WARC-Refers-To-Date", refersDate},
		{"WARC-Block-Digest", blockDigest},
		{"WARC-Payload-Digest", payloadDigest},
		{"Content-Type", "application/http;msgtype=response"},
		{"Content-Length", strconv.FormatInt(size, 10)},
	}
	err = w.writeRecord(fields, blocks...)
	respLen := c.n - start
	if err == nil && len(x.Request) > 0 {
		fields = []field{
			{"WARC-Type", "request"},
			{"WARC-Record-ID", reqID},
			{"WARC-Date", ts},
			{"WARC-Target-URI", x.TargetURI},
			{"WARC-IP-Address", x.IP},
			{"WARC-Warcinfo-ID", c.infoID},
			{"WARC-Concurrent-To", respID},
			{"WARC-Block-Digest", digestOf(x.Request)},
			{"Content-Type", "application/http;msgtype=request"},
			{"Content-Length", strconv.Itoa(len(x.Request))},
		}
		err = w.writeRecord(fields, bytes.NewReader(x.Request))
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		w.rollback(start)
		return Location{}, fmt.Errorf("warc: write exchange: write %s: %w", c.name, err)
	}
	loc := Location{File: c.name, Offset: start, Length: respLen, RecordID: respID}
	if c.n >= w.opt.MaxFileBytes {
		if err := w.finish(); err != nil {
			// The exchange is written; the file will be retried at the
			// next rotation or Close.
			return loc, fmt.Errorf("warc: write exchange: %w", err)
		}
	}
	return loc, nil
}

// Close finishes the open file, if any, and renames it to its final name.
// Later calls to WriteExchange return ErrClosed. Calling Close again
// retries a failed finish and is otherwise a no-op.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.cur == nil {
		return nil
	}
	if err := w.finish(); err != nil {
		return fmt.Errorf("warc: close: %w", err)
	}
	return nil
}

// Files returns the paths of the finished files, in the order they were
// finished.
func (w *Writer) Files() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.done...)
}
