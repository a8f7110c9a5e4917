package urlx

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"

	"github.com/redcrawl/redcrawl/shared/robots"
)

// Links is what ExtractLinks found in a document.
type Links struct {
	// URLs are the canonical absolute links, deduplicated, in document
	// order. Empty when NoFollow is set.
	URLs []*url.URL
	// NoFollow is set when the document carries
	// <meta name="robots" content="nofollow"> (or "none"): Robots.NoFollow.
	NoFollow bool
	// Robots are the directives of the document's robots meta tags
	// (<meta name="robots"> and the LinkOptions.MetaNames), combined.
	Robots robots.Directives
	// Canonical is the canonical form of the href of the document's first
	// <link rel="canonical"> in its head, resolved like a link; "" when
	// there is none or it is not a usable http(s) URL.
	Canonical string
	// RelNoFollow counts the links left out for their rel="nofollow",
	// "ugc" or "sponsored" (LinkOptions.ObeyRelNoFollow).
	RelNoFollow int
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
// into a tree, and only body is read. body should be UTF-8 (the document
// decoded): the path of a link is percent-encoded as UTF-8 and, with
// LinkOptions.Encoding, its query in the document's encoding, as browsers
// do. Non-UTF-8 bytes are percent-encoded as they are.
func (c *Canonicalizer) ExtractLinks(doc *url.URL, body []byte, maxLinks int) Links {
	return c.ExtractLinksWith(doc, body, LinkOptions{MaxLinks: maxLinks})
}

// LinkOptions configure ExtractLinksWith.
type LinkOptions struct {
	// MaxLinks caps the links returned; 0 = no cap.
	MaxLinks int
	// MetaNames are further <meta name> values, besides "robots", whose
	// content is robots directives: the crawler's product token
	// (<meta name="redcrawl">). Compared case-insensitively.
	MetaNames []string
	// ObeyRelNoFollow leaves out the links of <a> and <area> elements
	// whose rel lists nofollow, ugc or sponsored.
	ObeyRelNoFollow bool
	// IgnoreRobots returns the links whatever the robots meta tags say
	// (Links.Robots still reports them; NoFollow stays false).
	IgnoreRobots bool
	// Encoding is the WHATWG name of the encoding the document was
	// decoded from (content.Encoding.Name): the query of a link is
	// encoded in it, as browsers encode it ("?c=€" on an ISO-8859-15 page
	// is "?c=%A4"); the path is always UTF-8. "" (or utf-8, utf-16le,
	// utf-16be) = UTF-8. The body given is the decoded UTF-8 text.
	Encoding string
}

// ExtractLinksWith is ExtractLinks with options. The whole document is
// read for its robots meta tags (they combine, the most restrictive
// winning) and its canonical link; Links.Robots holds the directives and
// NoFollow is set, with no links returned, when they include nofollow.
func (c *Canonicalizer) ExtractLinksWith(doc *url.URL, body []byte, opt LinkOptions) Links {
	sc := linkScanner{metaNames: opt.MetaNames, obeyRel: opt.ObeyRelNoFollow, ignoreRobots: opt.IgnoreRobots}
	sc.scan(body, true)
	maxLinks := opt.MaxLinks
	res := Links{Robots: sc.robots, RelNoFollow: sc.relNoFollow}
	docBase, _ := c.baseOf(doc)
	base := docBase
	qe := newQueryEncoder(opt.Encoding)
	if sc.haveBase {
		if b, err := c.parseIn(docBase, sc.baseHref, qe); err == nil {
			base = &b
			res.BaseHref = b.String()
		}
	}
	if sc.haveCanonical {
		if cu, err := c.parseIn(base, sc.canonical, qe); err == nil {
			if s := cu.String(); len(s) <= MaxURLLength {
				res.Canonical = s
			}
		}
	}
	if sc.robots.NoFollow && !opt.IgnoreRobots {
		res.NoFollow = true
		return res
	}
	seen := make(map[string]struct{}, len(sc.refs))
	for _, ref := range sc.refs {
		cu, err := c.parseIn(base, ref, qe)
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
	metaNames []string // robots meta names besides "robots"
	obeyRel   bool     // leave out rel=nofollow|ugc|sponsored links
	// ignoreRobots collects links whatever the robots meta tags say
	ignoreRobots bool

	refs          []string
	baseHref      string
	haveBase      bool
	robots        robots.Directives
	canonical     string
	haveCanonical bool
	inBody        bool // a tag that does not belong in head was seen
	relNoFollow   int
}

// scan tokenizes body. The contents of <noscript> and <noframes> are raw
// text to the tokenizer; when nested is set they are scanned in turn (one
// level deep).
func (sc *linkScanner) scan(body []byte, nested bool) {
	z := html.NewTokenizer(bytes.NewReader(body))
	rawLinks := false // the next text token is the content of noscript/noframes
	headText := false // the next text token is the content of title/script/style
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return
		case html.TextToken:
			if rawLinks && nested {
				sc.scan(z.Text(), false)
			} else if !sc.inBody && !headText && len(bytes.TrimSpace(z.Text())) > 0 {
				sc.inBody = true // text starts the body
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			switch string(name) {
			case "a", "area":
				sc.inBody = true
				sc.anchor(z, hasAttr)
			case "frame", "iframe":
				sc.inBody = true
				if v, ok := attr(z, hasAttr, "src"); ok {
					sc.add(v)
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
				sc.meta(z, hasAttr)
			case "title", "script", "style":
				headText = tt == html.StartTagToken
				rawLinks = false
				continue
			case "html", "head", "template":
			case "noscript", "noframes":
				rawLinks = tt == html.StartTagToken
				continue
			default:
				sc.inBody = true // body, or an element that starts it
			}
		}
		rawLinks, headText = false, false
	}
}

// add collects a link reference, unless the document asked that its
// links not be followed.
func (sc *linkScanner) add(ref string) {
	if !sc.robots.NoFollow || sc.ignoreRobots {
		sc.refs = append(sc.refs, ref)
	}
}

// anchor collects the href of <a> or <area>, unless its rel says
// nofollow, ugc or sponsored and those are obeyed.
func (sc *linkScanner) anchor(z *html.Tokenizer, more bool) {
	rel, href, haveHref := relHref(z, more, true)
	if !haveHref {
		return
	}
	if sc.obeyRel {
		for _, r := range strings.Fields(rel) {
			switch strings.ToLower(r) {
			case "nofollow", "ugc", "sponsored":
				sc.relNoFollow++
				return
			}
		}
	}
	sc.add(href)
}

// relHref reads the rel and href attributes of the current tag; with
// firstHref the first href counts (as browsers do for <a>), else the last.
func relHref(z *html.Tokenizer, more, firstHref bool) (rel, href string, haveHref bool) {
	for more {
		var k, v []byte
		k, v, more = z.TagAttr()
		switch string(k) {
		case "rel":
			rel = string(v)
		case "href":
			if !haveHref || !firstHref {
				href, haveHref = string(v), true
			}
		}
	}
	return rel, href, haveHref
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
	rel, href, haveHref := relHref(z, more, false)
	if !haveHref {
		return
	}
	follow := false
	for _, r := range strings.Fields(rel) {
		switch strings.ToLower(r) {
		case "canonical":
			// only in head, as Google reads it: a canonical link in the
			// body may be anyone's
			if !sc.haveCanonical && !sc.inBody {
				sc.canonical, sc.haveCanonical = href, true
			}
		case "next", "prev", "previous", "alternate":
			follow = true
		case "stylesheet", "icon", "preload", "prefetch", "modulepreload":
			return
		}
	}
	if follow {
		sc.add(href)
	}
}

// meta reads a robots meta tag: <meta name="robots" content="..."> or a
// name of metaNames; its directives combine with earlier ones.
func (sc *linkScanner) meta(z *html.Tokenizer, more bool) {
	var name, content string
	for more {
		var k, v []byte
		k, v, more = z.TagAttr()
		switch string(k) {
		case "name":
			name = strings.TrimSpace(string(v))
		case "content":
			content = string(v)
		}
	}
	match := strings.EqualFold(name, "robots")
	for _, n := range sc.metaNames {
		match = match || (n != "" && strings.EqualFold(name, n))
	}
	if match {
		sc.robots = sc.robots.Merge(robots.ParseDirectives(content))
	}
}
