package testsite

import (
	"bytes"
	"strconv"
	"strings"
)

// words pad pages with text; read-only.
var words = [...]string{
	"crawler", "frontier", "spider", "lorem", "ipsum", "dolor", "sit", "amet",
	"harbor", "lantern", "meadow", "copper", "violet", "thunder", "pebble", "orchard",
	"quiet", "rapid", "silver", "gentle", "hollow", "bright", "distant", "narrow",
	"river", "mountain", "forest", "valley", "island", "desert", "glacier", "canyon",
	"the", "a", "of", "and", "to", "in", "is", "was",
	"fetch", "parse", "queue", "lease", "shard", "index", "token", "anchor",
	"morning", "evening", "winter", "summer", "north", "south", "east", "west",
	"paper", "ink", "stone", "glass", "cloud", "rain", "wind", "ember",
}

// docDir is the directory of page n's URL, against which its relative
// links resolve when it has no <base>.
func docDir(n int) string {
	if n == 0 {
		return "/"
	}
	return "/page/"
}

// relative writes path p relative to dir ("/" or "/page/"), without "./".
func relative(p, dir string) string {
	if dir == "/" {
		if p == "/" {
			return "./"
		}
		return p[1:]
	}
	if rest, ok := strings.CutPrefix(p, dir); ok {
		return rest
	}
	return ".." + p
}

// href is how pi writes l.
func (s *Site) href(pi *pageInfo, l link) string {
	switch l.to.kind {
	case kindMailto:
		return "mailto:webmaster@example.invalid"
	case kindJavascript:
		return "javascript:void(0)"
	}
	if l.form == formSelfFragment {
		return "#top"
	}
	baseHost, dir := pi.host, docDir(pi.n)
	if pi.baseHost >= 0 {
		baseHost, dir = pi.baseHost, "/"
	}
	p := l.to.path()
	addr := s.hosts[l.to.host].addr
	sameHost := l.to.host == baseHost
	plain := func() string {
		switch {
		case !sameHost:
			return "http://" + addr + p
		case pi.baseHost >= 0: // relative, so that only the <base> makes it right
			return relative(p, dir)
		default:
			return p
		}
	}
	switch l.form {
	case formFragment:
		return plain() + "#top"
	case formAmpFragment:
		return plain() + "#x=1&amp;y=2"
	case formDotSegment:
		if sameHost {
			return "/page/.." + p
		}
		return "http://" + addr + "/page/.." + p
	case formDotSlash:
		if sameHost {
			// "./3", "./page/3", "./../private/3", "./" (root from /)
			r := relative(p, dir)
			if strings.HasPrefix(r, "./") {
				return r
			}
			return "./" + r
		}
		return "http://" + addr + "/." + p
	case formUpperScheme:
		return "HTTP://" + addr + p
	case formProtoRelative:
		return "//" + addr + p
	}
	return plain()
}

// text is a link's anchor text.
func text(t target) string {
	switch t.kind {
	case kindPage:
		return "host " + strconv.Itoa(t.host) + " page " + strconv.Itoa(t.n)
	case kindPrivate:
		return "private " + strconv.Itoa(t.n)
	case kindMailto:
		return "write to us"
	case kindJavascript:
		return "click me"
	}
	return strings.TrimPrefix(t.path(), "/")
}

// renderPage writes page pi's HTML to b, padded to about PageBytes.
func (s *Site) renderPage(b *bytes.Buffer, pi *pageInfo) {
	title := "Host " + strconv.Itoa(pi.host) + " page " + strconv.Itoa(pi.n)
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>")
	b.WriteString(title)
	b.WriteString("</title>\n")
	if pi.baseHost >= 0 {
		b.WriteString("<base href=\"")
		if pi.baseAbs {
			b.WriteString(s.hosts[pi.baseHost].root)
		}
		b.WriteString("/\">\n")
	}
	b.WriteString("</head>\n<body>\n<h1 id=\"top\">")
	b.WriteString(title)
	b.WriteString("</h1>\n")
	if pi.rev > 0 {
		b.WriteString("<p class=\"rev\">revision ")
		b.WriteString(strconv.Itoa(pi.rev))
		b.WriteString("</p>\n")
	}
	b.WriteString("<ul>\n")
	for _, l := range pi.links {
		h := s.href(pi, l)
		switch l.form {
		case formDotSegment:
			b.WriteString("<li><a href='")
			b.WriteString(h)
			b.WriteString("'>")
		case formUpperScheme:
			b.WriteString("<li><A HREF=\"")
			b.WriteString(h)
			b.WriteString("\">")
		default:
			b.WriteString("<li><a href=\"")
			b.WriteString(h)
			b.WriteString("\">")
		}
		b.WriteString(text(l.to))
		if l.form == formUpperScheme {
			b.WriteString("</A></li>\n")
		} else {
			b.WriteString("</a></li>\n")
		}
	}
	b.WriteString("</ul>\n")
	const footer = "</body>\n</html>\n"
	r := newRNG(s.opts.Seed, streamPadding, pi.host, pi.n)
	for b.Len()+len(footer) < s.opts.PageBytes {
		b.WriteString("<p>")
		for i := 0; i < 80 && b.Len()+len(footer)+5 < s.opts.PageBytes; i++ {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.intn(len(words))])
		}
		b.WriteString(".</p>\n")
	}
	b.WriteString(footer)
}

// renderLeaf writes a small HTML page without links.
func renderLeaf(b *bytes.Buffer, title, body string) {
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>")
	b.WriteString(title)
	b.WriteString("</title>\n</head>\n<body>\n<h1>")
	b.WriteString(title)
	b.WriteString("</h1>\n<p>")
	b.WriteString(body)
	b.WriteString("</p>\n</body>\n</html>\n")
}
