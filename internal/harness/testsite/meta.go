package testsite

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// metaPrefix is the path of the hub of the pages that say something about
// themselves (Options.Meta); every such page is below it, on host 0.
const metaPrefix = "/meta/"

// MetaPage is a page of Options.Meta and what a crawler that obeys it,
// with fetch.user_agent's product token "redcrawl" and default options,
// does with it.
type MetaPage struct {
	URL string
	// Robots are the directives it records for the page, in the order
	// noindex, nofollow, noarchive ("" = none).
	Robots string
	// Stored: the page has a WARC record (not noindex, not noarchive).
	Stored bool
	// Target is the URL the page links to, and Followed whether the link
	// is followed (fetched).
	Target   string
	Followed bool
	// Canonical is the canonical URL the page names, "" if none.
	Canonical string
}

// MetaURLs are the URLs and facts of the pages of Options.Meta.
type MetaURLs struct {
	Hub   string
	Pages []MetaPage
	// Rel links to RelPlain plainly and to RelNoFollow with rel=nofollow,
	// ugc and sponsored: all are followed by default, only RelPlain with
	// crawl.obey_rel_nofollow.
	Rel         string
	RelPlain    string
	RelNoFollow []string
	// CanonicalMain is the canonical URL of Pages' canonical page, linked
	// from nowhere: fetched only with crawl.follow_canonical.
	CanonicalMain string
	// Brotli and Zstd are pages served br- and zstd-encoded to a client
	// that accepts it, each linking to its target, fetched only by a
	// crawler that decoded the page.
	Brotli, BrotliTarget, Zstd, ZstdTarget string
	// BombBrotli and BombZstd stream BombSize zero bytes, br- and
	// zstd-encoded whatever Accept-Encoding says.
	BombBrotli, BombZstd string
}

// metaSpec is one page of MetaURLs.Pages.
type metaSpec struct {
	name      string
	meta      []string // <meta name=... content=...> pairs, name then content
	header    []string // X-Robots-Tag values
	pdf       bool     // served as application/pdf, with no link
	canonical string   // path of a <link rel="canonical">
	robots    string
	stored    bool
	followed  bool
}

func metaSpecs() []metaSpec {
	return []metaSpec{
		{name: "plain", stored: true, followed: true},
		{name: "noindex", meta: []string{"robots", "noindex"}, robots: "noindex", followed: true},
		{name: "nofollow", meta: []string{"robots", "NoFollow"}, robots: "nofollow", stored: true},
		{name: "none", meta: []string{"ROBOTS", "none"}, robots: "noindex,nofollow"},
		{name: "noarchive", meta: []string{"robots", "noarchive"}, robots: "noarchive", followed: true},
		{name: "combined", meta: []string{"robots", "index, follow", "robots", "noarchive, nofollow"},
			robots: "nofollow,noarchive"},
		{name: "ours", meta: []string{"googlebot", "noindex", "redcrawl", "nofollow"}, robots: "nofollow", stored: true},
		{name: "header-noindex", header: []string{"noindex"}, robots: "noindex", followed: true},
		{name: "header-ua", header: []string{"googlebot: noindex", "redcrawl: nofollow, noarchive"},
			robots: "nofollow,noarchive"},
		{name: "header-other", header: []string{"otherbot: none"}, stored: true, followed: true},
		{name: "doc.pdf", header: []string{"noindex"}, pdf: true, robots: "noindex"},
		{name: "canonical-dup", canonical: metaPrefix + "canonical-main", stored: true, followed: true},
	}
}

// Meta returns the URLs and facts of the pages of Options.Meta, or the
// zero MetaURLs without it.
func (s *Site) Meta() MetaURLs {
	if !s.opts.Meta {
		return MetaURLs{}
	}
	root := s.hosts[0].root + metaPrefix
	m := MetaURLs{Hub: root, Rel: root + "rel", RelPlain: root + "rel-plain",
		RelNoFollow:   []string{root + "rel-nofollow", root + "rel-ugc", root + "rel-sponsored"},
		CanonicalMain: root + "canonical-main",
		Brotli:        root + "br", BrotliTarget: root + "br-target", Zstd: root + "zstd", ZstdTarget: root + "zstd-target",
		BombBrotli: root + "bomb.br", BombZstd: root + "bomb.zst"}
	for _, sp := range metaSpecs() {
		p := MetaPage{URL: root + sp.name, Robots: sp.robots, Stored: sp.stored, Followed: sp.followed}
		if !sp.pdf {
			p.Target = root + sp.name + "-target"
		}
		if sp.canonical != "" {
			p.Canonical = s.hosts[0].root + sp.canonical
		}
		m.Pages = append(m.Pages, p)
	}
	return m
}

// metaStatus is the status of a path below metaPrefix.
func metaStatus(rest string) int {
	switch {
	case rest == "", rest == "rel", rest == "canonical-main", rest == "br", rest == "zstd",
		rest == "bomb.br", rest == "bomb.zst", strings.HasSuffix(rest, "-target"), strings.HasPrefix(rest, "rel-"):
		return http.StatusOK
	}
	for _, sp := range metaSpecs() {
		if rest == sp.name {
			return http.StatusOK
		}
	}
	return http.StatusNotFound
}

// serveMeta serves a path below metaPrefix.
func (s *Site) serveMeta(w http.ResponseWriter, r *http.Request, rest string) {
	const html = "text/html; charset=utf-8"
	var b bytes.Buffer
	switch {
	case rest == "":
		var links []anchor
		for _, sp := range metaSpecs() {
			links = append(links, anchor{metaPrefix + sp.name, sp.name})
		}
		for _, n := range []string{"rel", "br", "zstd", "bomb.br", "bomb.zst"} {
			links = append(links, anchor{metaPrefix + n, n})
		}
		renderLinks(&b, "Pages that say something about themselves", links...)
	case rest == "rel":
		b.WriteString("<!DOCTYPE html>\n<html><head><title>rel</title></head><body>\n")
		b.WriteString(`<a href="rel-plain">plain</a> <a rel="nofollow" href="rel-nofollow">nofollow</a> ` +
			`<a rel="external UGC" href="rel-ugc">ugc</a> <area rel="sponsored" href="rel-sponsored">` + "\n</body></html>\n")
	case rest == "br" || rest == "zstd":
		renderLinks(&b, "Encoded "+rest, anchor{metaPrefix + rest + "-target", "target"})
		s.writeEncoded(w, r, rest, b.Bytes())
		return
	case rest == "bomb.br" || rest == "bomb.zst":
		s.serveStreamBomb(w, r, map[string]string{"bomb.br": "br", "bomb.zst": "zstd"}[rest])
		return
	case strings.HasSuffix(rest, "-target") || strings.HasPrefix(rest, "rel-") || rest == "canonical-main":
		b.WriteString("<!DOCTYPE html>\n<html><head><title>" + rest + "</title>")
		if rest == "canonical-main" {
			b.WriteString(`<link rel="canonical" href="` + metaPrefix + `canonical-main">`)
		}
		b.WriteString("</head><body><p>" + rest + "</p></body></html>\n")
	default:
		for _, sp := range metaSpecs() {
			if rest != sp.name {
				continue
			}
			for _, v := range sp.header {
				w.Header().Add("X-Robots-Tag", v)
			}
			if sp.pdf {
				s.write(w, r, http.StatusOK, "application/pdf", []byte("%PDF-1.4\n% a document that must not be stored\n%%EOF\n"))
				return
			}
			b.WriteString("<!DOCTYPE html>\n<html>\n<head>\n<title>" + sp.name + "</title>\n")
			for i := 0; i+1 < len(sp.meta); i += 2 {
				b.WriteString(`<meta name="` + sp.meta[i] + `" content="` + sp.meta[i+1] + "\">\n")
			}
			if sp.canonical != "" {
				b.WriteString(`<link rel="canonical" href="` + sp.canonical + "\">\n")
			}
			b.WriteString("</head>\n<body>\n<p><a href=\"" + sp.name + "-target\">target</a></p>\n</body>\n</html>\n")
		}
	}
	s.write(w, r, metaStatus(rest), html, b.Bytes())
}

// accepts reports whether Accept-Encoding values list coding with a
// non-zero quality.
func accepts(values []string, coding string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(part, ";")
			if !strings.EqualFold(strings.TrimSpace(name), coding) {
				continue
			}
			q, ok := strings.CutPrefix(strings.TrimSpace(params), "q=")
			if !ok {
				return true
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(q), 64); err != nil || f > 0 {
				return true
			}
		}
	}
	return false
}

// newEncoder returns a writer encoding to w in coding ("br" or "zstd").
func newEncoder(w io.Writer, coding string) (io.WriteCloser, error) {
	if coding == "br" {
		return brotli.NewWriterLevel(w, 1), nil
	}
	return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(1<<20))
}

// writeEncoded answers with an HTML body encoded in coding when the client
// accepts it, else as it is.
func (s *Site) writeEncoded(w http.ResponseWriter, r *http.Request, coding string, body []byte) {
	if !accepts(r.Header.Values("Accept-Encoding"), coding) {
		s.write(w, r, http.StatusOK, "text/html; charset=utf-8", body)
		return
	}
	var z bytes.Buffer
	enc, err := newEncoder(&z, coding)
	if err == nil {
		_, err = enc.Write(body)
		if cerr := enc.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError) // the hit says 200; never happens
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Encoding", coding)
	hdr.Set("Vary", "Accept-Encoding")
	hdr.Set("Content-Length", strconv.Itoa(z.Len()))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(z.Bytes())
	}
}

// serveStreamBomb streams BombSize zero bytes encoded in coding, encoding
// as the client reads: it stops when the client goes away.
func (s *Site) serveStreamBomb(w http.ResponseWriter, r *http.Request, coding string) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Encoding", coding)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	enc, err := newEncoder(w, coding)
	if err != nil {
		return
	}
	zeros := make([]byte, 64<<10)
	for n := 0; n < BombSize && !s.aborted(r); n += len(zeros) { // at most BombSize/64 KiB writes
		if _, err := enc.Write(zeros); err != nil {
			return
		}
	}
	enc.Close()
}
