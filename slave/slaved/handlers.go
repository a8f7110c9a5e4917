package slaved

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/robots"
	"github.com/redcrawl/redcrawl/slave/content"
)

// Doc is a fetched 2xx document on its way through a content handler.
type Doc struct {
	URL   *url.URL
	Lease frontier.Lease
	// MediaType is the Content-Type's media type, lower case, or the
	// sniffed one when the server sent none.
	MediaType string
	Header    http.Header
	Body      *content.Body

	// Set by the handler.
	Text     []byte     // the document decoded to UTF-8, when the handler decoded it
	Charset  string     // the encoding the document was decoded from
	Links    []*url.URL // canonical absolute links to follow
	NoFollow bool       // the page asked not to be followed
	// Robots are the directives of the page's robots meta tags, and
	// Canonical the URL of its <link rel="canonical"> ("" = none); an
	// HTML handler sets them, the X-Robots-Tag and Link headers are read
	// for every document.
	Robots    robots.Directives
	Canonical string
}

// A Handler processes the documents of the media types it is registered
// for. HTML is parsed for links; other types are stored and recorded
// without parsing. Handlers run concurrently and must not keep the Doc.
type Handler interface {
	Name() string
	Handle(ctx context.Context, d *Doc) error
}

// Handlers maps media types to handlers: an exact type ("text/html"), a
// type wildcard ("text/*"), then the fallback.
type Handlers struct {
	mu       sync.RWMutex
	byType   map[string]Handler
	fallback Handler
}

// NewHandlers returns a registry whose fallback stores documents without
// parsing them.
func NewHandlers() *Handlers {
	return &Handlers{byType: map[string]Handler{}, fallback: storeHandler{}}
}

// Register makes h handle a media type ("application/rss+xml", "text/*",
// or "*/*" for the fallback); a later registration replaces an earlier one.
func (h *Handlers) Register(mediaType string, handler Handler) error {
	mt := strings.ToLower(strings.TrimSpace(mediaType))
	if mt != "*/*" {
		if _, _, err := mime.ParseMediaType(mt); err != nil || !strings.Contains(mt, "/") {
			return fmt.Errorf("register handler %s: invalid media type %q", handler.Name(), mediaType)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if mt == "*/*" {
		h.fallback = handler
	} else {
		h.byType[mt] = handler
	}
	return nil
}

// Lookup returns the handler of a media type.
func (h *Handlers) Lookup(mediaType string) Handler {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if x, ok := h.byType[mediaType]; ok {
		return x
	}
	if i := strings.IndexByte(mediaType, '/'); i > 0 {
		if x, ok := h.byType[mediaType[:i]+"/*"]; ok {
			return x
		}
	}
	return h.fallback
}

// mediaType returns the media type of a response: the Content-Type's, or
// sniffed from the body when there is none or it is unparsable.
func mediaType(ct string, prefix []byte) string {
	if ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil {
			return strings.ToLower(mt)
		}
	}
	mt, _, _ := mime.ParseMediaType(http.DetectContentType(prefix))
	return mt
}

// CharsetError is a handler's failure to decode a document's text; the
// page gets a charset exception (other handler errors are parse
// exceptions).
type CharsetError struct{ Err error }

func (e *CharsetError) Error() string { return e.Err.Error() }
func (e *CharsetError) Unwrap() error { return e.Err }

// storeHandler records a document without parsing it: its body goes to
// the WARC file and its page record to MySQL.
type storeHandler struct{}

func (storeHandler) Name() string                       { return "store" }
func (storeHandler) Handle(context.Context, *Doc) error { return nil }

// htmlHandler decodes an HTML document to UTF-8 (HTTP header, BOM,
// <meta>, then sniffing) and extracts its links with the tokenizer.
type htmlHandler struct {
	s *Slave
}

func (htmlHandler) Name() string { return "html" }

func (h htmlHandler) Handle(_ context.Context, d *Doc) error {
	ct := d.Header.Get("Content-Type")
	enc := content.DetectBody(d.Body, ct)
	var body []byte
	var err error
	if enc.Name == "utf-8" && d.Body.InMemory() {
		body, err = d.Body.Bytes() // no copy, no decoder
	} else {
		var r io.Reader
		if r, err = content.DecodeHTMLAs(d.Body, enc); err != nil {
			return &CharsetError{Err: fmt.Errorf("decode html: %w", err)}
		}
		// decoded text is at most a few times the encoded size; the body
		// itself is capped by fetch.max_body_bytes
		body, err = io.ReadAll(io.LimitReader(r, 4*d.Body.Size()+4096))
	}
	d.Charset = enc.Name
	if err != nil {
		return fmt.Errorf("read html: %w", err)
	}
	d.Text = body
	opt := h.s.linkOpt
	opt.Encoding = enc.Name // queries in the page's encoding, as browsers send them
	links := h.s.canon.ExtractLinksWith(d.URL, body, opt)
	d.NoFollow = links.NoFollow
	d.Links = links.URLs
	d.Robots = links.Robots
	d.Canonical = links.Canonical
	return nil
}
