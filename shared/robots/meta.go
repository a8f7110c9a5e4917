package robots

import (
	"strings"
)

// Directives are what a page says about itself in <meta name="robots">,
// <meta name="<token>"> and the X-Robots-Tag response header, as Google
// documents them (developers.google.com/search/docs/crawling-indexing/
// robots-meta-tag). Only the directives the crawler acts on are kept; the
// zero value is the default, "all" (index, follow, archive).
//
// The crawler is not a search engine: NoIndex means the page is not stored
// (no WARC record, no items), NoArchive means no WARC record, NoFollow means
// its links are not followed.
type Directives struct {
	NoIndex   bool
	NoFollow  bool
	NoArchive bool
}

// Merge combines two sets of directives: the most restrictive wins, as when
// a page has several robots meta tags or X-Robots-Tag headers.
func (d Directives) Merge(o Directives) Directives {
	return Directives{
		NoIndex:   d.NoIndex || o.NoIndex,
		NoFollow:  d.NoFollow || o.NoFollow,
		NoArchive: d.NoArchive || o.NoArchive,
	}
}

// IsZero reports whether d is the default: nothing restricted.
func (d Directives) IsZero() bool { return d == Directives{} }

// String is the restricting directives in a fixed order, comma-separated
// ("noindex,nofollow"), or "" for the default. It is what a page record
// carries (pages.robots).
func (d Directives) String() string {
	var parts []string
	if d.NoIndex {
		parts = append(parts, "noindex")
	}
	if d.NoFollow {
		parts = append(parts, "nofollow")
	}
	if d.NoArchive {
		parts = append(parts, "noarchive")
	}
	return strings.Join(parts, ",")
}

// apply sets the directive named by one list item (lower-cased, trimmed);
// unknown directives and those the crawler does not act on are ignored.
func (d *Directives) apply(name string) {
	switch name {
	case "noindex":
		d.NoIndex = true
	case "nofollow":
		d.NoFollow = true
	case "none": // = noindex, nofollow
		d.NoIndex, d.NoFollow = true, true
	case "noarchive", "nocache": // nocache: Bing's name for noarchive
		d.NoArchive = true
	}
	// all, index, follow: the defaults, which never lift a restriction
	// given elsewhere (the most restrictive wins)
}

// ParseDirectives parses the content of a robots meta tag: directives
// separated by commas (or, leniently, white space), case-insensitive.
// Directives with a value ("max-snippet:20", "unavailable_after: ...")
// and unknown ones are ignored.
func ParseDirectives(content string) Directives {
	var d Directives
	for _, item := range strings.FieldsFunc(content, isListSep) {
		d.apply(strings.ToLower(item))
	}
	return d
}

// isListSep separates the items of a directive list: commas and ASCII white
// space.
func isListSep(r rune) bool {
	return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f'
}

// valued are the directives that take a value after a colon; any other
// name before a colon in an X-Robots-Tag is a user agent.
var valued = map[string]bool{
	"unavailable_after": true, "max-snippet": true, "max-image-preview": true, "max-video-preview": true,
}

// HeaderDirectives parses X-Robots-Tag header values for the crawler whose
// product token is token (ProductToken; compared case-insensitively). A
// value may start with a user agent and a colon ("googlebot: noindex"):
// its directives then apply only to that crawler, up to the next user
// agent in the same value; directives without one apply to every crawler.
// All values combine, the most restrictive winning.
func HeaderDirectives(values []string, token string) Directives {
	var d Directives
	for _, v := range values {
		forUs := true // no user agent yet: every crawler
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if name, rest, ok := strings.Cut(item, ":"); ok {
				name = strings.ToLower(strings.TrimSpace(name))
				if !valued[name] && name != "" && !strings.ContainsAny(name, " \t") {
					forUs = token != "" && name == strings.ToLower(token)
					item = strings.TrimSpace(rest)
				}
			}
			if !forUs {
				continue
			}
			for _, w := range strings.Fields(item) {
				d.apply(strings.ToLower(w))
			}
		}
	}
	return d
}

// ProductToken returns the crawler's product token in a User-Agent string:
// its leading run of [A-Za-z_-] characters ("redcrawl" for
// "redcrawl/0.1 (+https://example.org)"), which robots.txt groups, robots
// meta tags (<meta name="redcrawl">) and X-Robots-Tag headers name.
func ProductToken(userAgent string) string { return productToken(userAgent) }
