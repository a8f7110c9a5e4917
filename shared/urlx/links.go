package urlx

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// Links is what ExtractLinks found in a document.
type Links struct {
	// URLs are the canonical absolute links, deduplicated, in document
	// order. Empty when NoFollow is set.
	URLs []*url.URL
	// NoFollow is set when the document carries
	// <meta name="robots" content="nofollow"> (or "none").
	NoFollow bool
	// BaseHref is the canonical form of the document's first usable
	// <base href>, resolved against the document URL; "" when there is
	// none. Relative links are resolved against it.
	BaseHref string
}

// ExtractLinks returns the links of an HTML document fetched from doc: the
// href of <a> and <area>, the src of <frame> and <iframe>, and the href of
// <link rel="next|prev|alternate"> (not alternate stylesheets), also inside
// <noscript> and <noframes>. Relative links are resolved against the
// document's first <base href> (itself resolved against doc), or doc.
// Links that are empty, fragment-only, not http(s) (javascript:, mailto:,
// data:, tel:, ...) or invalid are skipped. The result is canonicalized,
// deduplicated, in document order and holds at most maxLinks URLs (0 = no
// cap). When the document has <meta name="robots" content="nofollow"> (or
// "none"), NoFollow is set and no links are returned.
//
// The document is read with the golang.org/x/net/html tokenizer, not parsed
// into a tree, and only body is read. Non-ASCII bytes of a href in a legacy
// encoding are percent-encoded as they are (browsers convert the path to
// UTF-8 and encode the query in the document encoding).
func (c *Canonicalizer) ExtractLinks(doc *url.URL, body []byte, maxLinks int) Links {
	var sc linkScanner
	sc.scan(body, true)
	var res Links
	docBase, _ := c.baseOf(doc)
	base := docBase
	if sc.haveBase {
		if b, err := c.parse(docBase, sc.baseHref); err == nil {
			base = &b
			res.BaseHref = b.String()
		}
	}
	if sc.noFollow {
		res.NoFollow = true
		return res
	}
	seen := make(map[string]struct{}, len(sc.refs))
	for _, ref := range sc.refs {
		cu, err := c.parse(base, ref)
		if err != nil {
			continue
		}
		s := cu.String()
		if _, dup := seen[s]; dup || len(s) > MaxURLLength {
			continue
		}
		u, err := url.Parse(s)
		if err != nil {
			continue
		}
		seen[s] = struct{}{}
		res.URLs = append(res.URLs, u)
		if maxLinks > 0 && len(res.URLs) >= maxLinks {
			break
		}
	}
	return res
}

// linkScanner collects the raw link references of a document. The base
// element is collected separately so that it applies to the whole document,
// also to links before it, as in browsers.
type linkScanner struct {
	refs     []string
	baseHref string
	haveBase bool
	noFollow bool
}

// scan tokenizes body. The contents of <noscript> and <noframes> are raw
// text to the tokenizer; when nested is set they are scanned in turn (one
// level deep).
func (sc *linkScanner) scan(body []byte, nested bool) {
	z := html.NewTokenizer(bytes.NewReader(body))
	rawLinks := false // the next text token is the content of noscript/noframes
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return
		case html.TextToken:
			if rawLinks && nested {
				sc.scan(z.Text(), false)
				if sc.noFollow {
					return
				}
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch string(name) {
			case "a", "area":
				if v, ok := attr(z, hasAttr, "href"); ok {
					sc.refs = append(sc.refs, v)
				}
			case "frame", "iframe":
				if v, ok := attr(z, hasAttr, "src"); ok {
					sc.refs = append(sc.refs, v)
				}
			case "link":
				sc.link(z, hasAttr)
			case "base":
				if !sc.haveBase {
					if v, ok := attr(z, hasAttr, "href"); ok {
						sc.baseHref, sc.haveBase = v, true
					}
				}
			case "meta":
				if sc.metaNoFollow(z, hasAttr) {
					sc.noFollow = true
					return
				}
			case "noscript", "noframes":
				rawLinks = tt == html.StartTagToken
				continue
			}
		}
		rawLinks = false
	}
}

// attr returns the value of the attribute key of the current tag.
func attr(z *html.Tokenizer, more bool, key string) (string, bool) {
	for more {
		var k, v []byte
		k, v, more = z.TagAttr()
		if string(k) == key {
			return string(v), true
		}
	}
	return "", false
}

// link collects the href of <link rel="next|prev|alternate">.
func (sc *linkScanner) link(z *html.Tokenizer, more bool) {
	var rel, href string
	var haveHref bool
	for more {
		var k, v []byte
		k, v, more = z.TagAttr()
		switch string(k) {
		case "rel":
			rel = string(v)
		case "href":
			href, haveHref = string(v), true
		}
	}
	if !haveHref {
		return
	}
	follow := false
	for _, r := range strings.Fields(rel) {
		switch strings.ToLower(r) {
		case "next", "prev", "previous", "alternate":
			follow = true
		case "stylesheet", "icon", "preload", "prefetch", "modulepreload":
			return
		}
	}
	if follow {
		sc.refs = append(sc.refs, href)
	}
}

// metaNoFollow reports whether the current <meta> is
// <meta name="robots" content="...nofollow..."> or content="none".
func (sc *linkScanner) metaNoFollow(z *html.Tokenizer, more bool) bool {
	var isRobots bool
	var content string
	for more {
		var k, v []byte
		k, v, more = z.TagAttr()
		switch string(k) {
		case "name":
			isRobots = strings.EqualFold(strings.TrimSpace(string(v)), "robots")
		case "content":
			content = string(v)
		}
	}
	if !isRobots {
		return false
	}
	for _, d := range strings.FieldsFunc(content, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' }) {
		if strings.EqualFold(d, "nofollow") || strings.EqualFold(d, "none") {
			return true
		}
	}
	return false
}
