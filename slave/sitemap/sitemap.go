// Package sitemap parses the sitemaps a site publishes (sitemaps.org
// protocol 0.9): a urlset, a sitemap index, a text file of one URL per
// line, or a feed (RSS 2.0, RSS 1.0, Atom 1.0: Google, crawler-commons and
// Scrapy accept feeds as sitemaps), each possibly gzip-compressed.
//
// A damaged urlset or index is read as crawler-commons reads it, and what
// was repaired is counted (Result.Repairs): an entry without <loc> whose
// text is a URL is that URL, each further <loc> of one entry starts an
// entry of its own, and an entry cut by the end of the file (or a syntax
// error) is kept when its <loc> was complete.
//
// The parser streams: an XML sitemap is read token by token with
// encoding/xml's Decoder, a text sitemap line by line, so memory stays
// proportional to one entry, never to the file. Every bound is explicit:
//
//   - MaxBytes of (decompressed) input, 50 MB by the protocol: beyond it
//     parsing stops with ErrTooLarge (a gzip bomb ends here);
//   - MaxURLs entries, 50,000 by the protocol: the first MaxURLs are kept
//     and parsing stops with ErrTooManyURLs;
//   - elements nested at most maxNesting deep and an entry's fields at most
//     maxField bytes each;
//   - entities: encoding/xml knows only the five XML entities and numeric
//     character references; it skips a DOCTYPE's entity declarations and
//     fails on any other reference, so an entity-expansion bomb (billion
//     laughs) is a syntax error after reading its declarations, not an
//     expansion.
//
// A limit or a syntax error part way returns the entries read so far with
// the error, so a caller can keep them and record the problem.
package sitemap

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The protocol's limits for one sitemap file.
const (
	// MaxURLs is the most URLs (or child sitemaps) one file may list.
	MaxURLs = 50000
	// MaxBytes is the largest (uncompressed) size of one file.
	MaxBytes = 50 << 20
	// MaxLocLength is the protocol's bound on a URL: less than 2,048
	// characters. Longer locations are counted as invalid.
	MaxLocLength = 2047
)

// maxNesting bounds how deep elements nest (a sitemap needs 3: urlset,
// url, loc; extensions such as image:image add one or two).
const maxNesting = 16

// maxRun bounds the bytes between two markup delimiters ('<' or '>'): the
// Decoder holds a whole text, comment or tag in memory, and no valid
// sitemap has one anywhere near this long.
const maxRun = 1 << 20

// maxField bounds the bytes kept of one field of an entry; loc is also
// bounded by MaxLocLength.
const maxField = 4096

// Format is what a sitemap file is.
type Format uint8

const (
	// Unknown: not a sitemap (another XML root element, or empty).
	Unknown Format = iota
	// URLSet lists pages (<urlset>).
	URLSet
	// Index lists other sitemaps (<sitemapindex>).
	Index
	// Text lists pages, one URL per line.
	Text
	// RSS is an RSS 2.0 feed (<rss>) or an RSS 1.0 one (<rdf:RDF>): each
	// <item>'s <link> (else its <guid>, else its rdf:about) is a page,
	// <pubDate> (RFC 822) or <dc:date> its lastmod.
	RSS
	// Atom is an Atom 1.0 feed (<feed>): each <entry>'s first <link>
	// whose rel is absent or "alternate" is a page, <updated> (else
	// <published>) its lastmod.
	Atom
)

func (f Format) String() string {
	switch f {
	case URLSet:
		return "urlset"
	case Index:
		return "sitemapindex"
	case Text:
		return "text"
	case RSS:
		return "rss"
	case Atom:
		return "atom"
	}
	return "unknown"
}

// Entry is one <url> of a urlset, one <sitemap> of an index, one line of
// a text sitemap, or one item or entry of a feed.
type Entry struct {
	// Loc is the absolute http or https URL, as written (not canonical).
	Loc string
	// LastMod is when the page (or child sitemap) last changed; zero when
	// absent or not a W3C datetime.
	LastMod time.Time
	// ChangeFreq is always, hourly, daily, weekly, monthly, yearly or
	// never; "" when absent or invalid.
	ChangeFreq string
	// Priority is the page's priority relative to the site's other pages,
	// in [0, 1]; HasPriority is false when it was absent or invalid (the
	// protocol's default is then 0.5).
	Priority    float64
	HasPriority bool
}

// Result is what a sitemap file lists.
type Result struct {
	Format Format
	// Entries are the valid entries in file order: pages for URLSet,
	// Text, RSS and Atom, child sitemaps for Index.
	Entries []Entry
	// Invalid counts the entries dropped because their loc was missing,
	// not an absolute http(s) URL, or too long.
	Invalid int
	// Repairs counts what was recovered from a damaged file.
	Repairs Repairs
	// Bytes is the (decompressed) input read.
	Bytes int64
}

// Repairs counts what Parse recovered from a damaged file, as
// crawler-commons recovers it (BareLocs and ExtraLocs in a urlset or
// index, Truncated in any XML format); the zero value: nothing was
// damaged.
type Repairs struct {
	// BareLocs counts the entries without <loc> whose text was read as
	// their URL (<sitemap>https://…</sitemap>).
	BareLocs int
	// ExtraLocs counts the <loc> elements after the first of one entry,
	// each read as an entry of its own with the fields that follow it.
	ExtraLocs int
	// Truncated is 1 when the file ended (a syntax error, the end of the
	// input, a limit) inside an entry whose URL was complete, and that
	// entry was kept.
	Truncated int
}

// IsZero reports whether nothing was repaired.
func (r Repairs) IsZero() bool { return r == Repairs{} }

// String says what was repaired, for a message ("" when nothing was).
func (r Repairs) String() string {
	var parts []string
	if r.BareLocs > 0 {
		parts = append(parts, fmt.Sprintf("%d %s without <loc> (the text read as the URL)", r.BareLocs, plural(r.BareLocs, "entry", "entries")))
	}
	if r.ExtraLocs > 0 {
		parts = append(parts, fmt.Sprintf("%d extra <loc> in one entry (each read as an entry of its own)", r.ExtraLocs))
	}
	if r.Truncated > 0 {
		parts = append(parts, "the last entry cut short (kept: its URL was complete)")
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, more string) string {
	if n == 1 {
		return one
	}
	return more
}

// Limits bound one parse; zero fields take the protocol's values.
type Limits struct {
	MaxURLs  int
	MaxBytes int64
}

func (l Limits) norm() Limits {
	if l.MaxURLs <= 0 {
		l.MaxURLs = MaxURLs
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = MaxBytes
	}
	return l
}

// The errors a limit ends a parse with (wrapped with the numbers).
var (
	ErrTooManyURLs = errors.New("sitemap lists too many URLs")
	ErrTooLarge    = errors.New("sitemap too large")
	// ErrNotSitemap: the XML root element is none of urlset,
	// sitemapindex, rss, rdf:RDF or feed, or a text file has no http(s)
	// URL.
	ErrNotSitemap = errors.New("not a sitemap")
)

// Parse reads one sitemap file of any format: gzip is recognised by its
// magic bytes, XML by a first non-blank byte '<' (its root element tells a
// urlset, an index and the feeds apart), anything else is a text sitemap
// (or ErrNotSitemap when no line is an http(s) URL). A file that ends with
// a limit or a syntax error returns the entries read before it and the
// error.
func Parse(r io.Reader, lim Limits) (*Result, error) {
	lim = lim.norm()
	in, err := open(r, lim.MaxBytes)
	if err != nil {
		return &Result{}, err
	}
	res, err := parse(in, lim)
	res.Bytes = in.n
	return res, err
}

// Detect reports the format of a file from its start (at most 4 KiB read,
// decompressed when gzip): URLSet, Index, RSS or Atom for XML with that
// root element, Text for anything whose first non-blank byte is not '<'
// (Parse may still find no URL in it), else Unknown.
func Detect(r io.Reader) Format {
	in, err := open(r, 4<<10)
	if err != nil {
		return Unknown
	}
	if isText(in.br) {
		return Text
	}
	g, _ := root(newDecoder(in.br))
	return g.format
}

// DetectXML is Detect for XML only: Text is reported as Unknown (a page
// that is not known to be a sitemap is only taken for one by its root
// element; a caller may take only URLSet and Index for one, as a feed is
// also an ordinary document).
func DetectXML(r io.Reader) Format {
	if f := Detect(r); f != Text {
		return f
	}
	return Unknown
}

// input is the decompressed, counted and capped input.
type input struct {
	br  *bufio.Reader
	n   int64 // bytes read through the cap
	max int64
	src io.Reader
	err error // sticky: bufio.Reader.Peek forgets an error once returned
}

func (in *input) Read(p []byte) (int, error) {
	if in.err != nil {
		return 0, in.err
	}
	if in.n >= in.max {
		// one byte more tells a file of exactly max bytes from a larger one
		var one [1]byte
		if k, _ := io.ReadFull(in.src, one[:]); k > 0 {
			in.err = fmt.Errorf("%w: more than %d bytes (uncompressed)", ErrTooLarge, in.max)
		} else {
			in.err = io.EOF
		}
		return 0, in.err
	}
	if int64(len(p)) > in.max-in.n {
		p = p[:in.max-in.n]
	}
	k, err := in.src.Read(p)
	in.n += int64(k)
	if err != nil {
		in.err = err
	}
	return k, err
}

// open wraps r: gzip is decompressed, and at most max bytes of the
// result are read.
func open(r io.Reader, max int64) (*input, error) {
	br := bufio.NewReader(r)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("sitemap gzip: %w", err)
		}
		src = zr
	}
	in := &input{max: max, src: src}
	in.br = bufio.NewReader(in)
	return in, nil
}

// isText reports whether the first non-blank byte (after a UTF-8 BOM) is
// not '<'.
func isText(br *bufio.Reader) bool {
	b, _ := br.Peek(4096)
	b = bytes.TrimLeft(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")), " \t\r\n")
	return len(b) > 0 && b[0] != '<'
}

// rawEntry is an entry as read, before it is validated.
type rawEntry struct {
	loc, changefreq, priority string
	lastmod                   time.Time
	locTooLong                bool
}

// add validates an entry and appends it, or counts it invalid; it fails
// once the entries would go over the limit.
func (res *Result) add(e rawEntry, lim Limits) error {
	if e.locTooLong || !validLoc(e.loc) {
		res.Invalid++
		return nil
	}
	if len(res.Entries) >= lim.MaxURLs {
		return fmt.Errorf("%w: more than %d entries, kept the first %d", ErrTooManyURLs, lim.MaxURLs, lim.MaxURLs)
	}
	out := Entry{Loc: e.loc, LastMod: e.lastmod, ChangeFreq: changeFreq(e.changefreq)}
	if p, err := strconv.ParseFloat(e.priority, 64); err == nil && p >= 0 && p <= 1 {
		out.Priority, out.HasPriority = p, true
	}
	res.Entries = append(res.Entries, out)
	return nil
}

func validLoc(s string) bool {
	if s == "" || len(s) > MaxLocLength {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func changeFreq(s string) string {
	s = strings.ToLower(s)
	switch s {
	case "always", "hourly", "daily", "weekly", "monthly", "yearly", "never":
		return s
	}
	return ""
}

// lastmodLayouts are the W3C Datetime forms the protocol allows.
var lastmodLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04Z07:00",
	"2006-01-02",
	"2006-01",
	"2006",
}

// ParseLastMod parses a W3C datetime (YYYY, YYYY-MM, YYYY-MM-DD,
// YYYY-MM-DDThh:mmTZD, YYYY-MM-DDThh:mm:ss[.s]TZD); the zero time when it
// is none of them.
func ParseLastMod(s string) time.Time {
	for _, l := range lastmodLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// parseText reads a text sitemap: one URL per line, blank lines skipped;
// a line that is not an absolute http(s) URL counts as invalid. A file in
// which no line is one is not a sitemap (ErrNotSitemap): a bogus body, an
// error message served as text.
func parseText(br *bufio.Reader, lim Limits) (*Result, error) {
	res, err := readText(br, lim)
	if err == nil && len(res.Entries) == 0 && res.Invalid > 0 {
		err = fmt.Errorf("%w: text without an http(s) URL (%d non-blank %s)", ErrNotSitemap, res.Invalid, plural(res.Invalid, "line", "lines"))
		res.Format, res.Invalid = Unknown, 0
	}
	return res, err
}

// readText reads the lines of a text sitemap.
func readText(br *bufio.Reader, lim Limits) (*Result, error) {
	res := &Result{Format: Text}
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// a line longer than the buffer: invalid; skip to its end
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			res.Invalid++
			line = nil
		}
		if s := strings.TrimSpace(strings.TrimPrefix(string(line), "\ufeff")); s != "" {
			if e := res.add(rawEntry{loc: s}, lim); e != nil {
				return res, e
			}
		}
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("sitemap text: %w", err)
		}
	}
}
