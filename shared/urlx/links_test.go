package urlx

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// linksResult is Links with the URLs as strings, for comparison.
type linksResult struct {
	URLs     []string
	NoFollow bool
	BaseHref string
}

func toResult(l Links) linksResult {
	r := linksResult{NoFollow: l.NoFollow, BaseHref: l.BaseHref}
	for _, u := range l.URLs {
		r.URLs = append(r.URLs, u.String())
	}
	return r
}

func TestExtractLinks(t *testing.T) {
	c := newTestCanon(t)
	doc, err := url.Parse("http://example.com/dir/page.html?x=1")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		html     string
		maxLinks int
		want     linksResult
	}{
		{
			name: "relative and absolute",
			html: `<html><body><a href="a.html">a</a> <a href="/b">b</a> <a href="../c/">c</a>
				<a href="http://Other.COM:80/x#frag">x</a> <a href="?q=2">q</a> <a href="//cdn.example.net/y">y</a></body></html>`,
			want: linksResult{URLs: []string{
				"http://example.com/dir/a.html", "http://example.com/b", "http://example.com/c/",
				"http://other.com/x", "http://example.com/dir/page.html?q=2", "http://cdn.example.net/y"}},
		},
		{
			name: "base href absolute",
			html: `<head><base href="https://static.example.com/sub/index.html"></head><a href="x">x</a><a href="/y">y</a>`,
			want: linksResult{URLs: []string{"https://static.example.com/sub/x", "https://static.example.com/y"},
				BaseHref: "https://static.example.com/sub/index.html"},
		},
		{
			name: "base href relative to the document",
			html: `<base href="../other/"><a href="x">x</a>`,
			want: linksResult{URLs: []string{"http://example.com/other/x"}, BaseHref: "http://example.com/other/"},
		},
		{
			name: "first base wins and applies to earlier links",
			html: `<a href="early">e</a><base href="/one/"><base href="/two/"><a href="late">l</a>`,
			want: linksResult{URLs: []string{"http://example.com/one/early", "http://example.com/one/late"},
				BaseHref: "http://example.com/one/"},
		},
		{
			name: "base without href is ignored",
			html: `<base target="_blank"><base href="/b/"><a href="x">x</a>`,
			want: linksResult{URLs: []string{"http://example.com/b/x"}, BaseHref: "http://example.com/b/"},
		},
		{
			name: "unusable base falls back to the document",
			html: `<base href="javascript:void(0)"><a href="x">x</a>`,
			want: linksResult{URLs: []string{"http://example.com/dir/x"}},
		},
		{
			name: "non-http schemes and self links skipped",
			html: `<a href="javascript:void(0)">j</a><a href=" JavaScript:alert(1)">j</a><a href="mailto:a@example.com">m</a>
				<a href="data:text/html,hi">d</a><a href="tel:+123">t</a><a href="ftp://example.com/f">f</a>
				<a href="#top">t</a><a href="">e</a><a>no href</a><a href="irc://x">i</a><a href="ok">ok</a>`,
			want: linksResult{URLs: []string{"http://example.com/dir/ok"}},
		},
		{
			name: "frames iframes area",
			html: `<frameset><frame src="f1.html"><frame src="/f2.html"></frameset>
				<iframe src="//player.example.net/v/1"></iframe>
				<map name="m"><area shape="rect" coords="0,0,1,1" href="/map1"><area nohref></map>`,
			want: linksResult{URLs: []string{"http://example.com/dir/f1.html", "http://example.com/f2.html",
				"http://player.example.net/v/1", "http://example.com/map1"}},
		},
		{
			name: "meta robots nofollow",
			html: `<head><meta name="robots" content="noindex, nofollow"><base href="/b/"></head><a href="/x">x</a>`,
			want: linksResult{NoFollow: true, BaseHref: "http://example.com/b/"}, // the whole document is read
		},
		{
			name: "meta robots none upper case",
			html: `<a href="/x">x</a><META NAME="ROBOTS" CONTENT="NONE">`,
			want: linksResult{NoFollow: true},
		},
		{
			name: "meta robots follow and other bots",
			html: `<meta name="robots" content="index,follow"><meta name="googlebot" content="nofollow"><meta content="nofollow"><a href="/x">x</a>`,
			want: linksResult{URLs: []string{"http://example.com/x"}},
		},
		{
			name: "entities in href",
			html: `<a href="/s?a=1&amp;b=2&lt;3">s</a><a href="&#x2F;t&#47;u">t</a><a href="/v?x=1&copy=2">v</a>`,
			want: linksResult{URLs: []string{"http://example.com/s?a=1&b=2%3C3", "http://example.com/t/u",
				"http://example.com/v?x=1&copy=2"}},
		},
		{
			name: "whitespace around and inside href",
			html: "<a href=\"  \n\t/x \t \">x</a><a href=\"/y\n/z\">y</a><a href='  https://example.org/q  '>q</a>",
			want: linksResult{URLs: []string{"http://example.com/x", "http://example.com/y/z", "https://example.org/q"}},
		},
		{
			name: "upper case tags and attributes, unquoted values",
			html: `<A HREF=/up>u</A><IFRAME SRC=/frame></IFRAME><AREA HREF='/area'><Frame Src="/fr">`,
			want: linksResult{URLs: []string{"http://example.com/up", "http://example.com/frame",
				"http://example.com/area", "http://example.com/fr"}},
		},
		{
			name: "deduplicated in canonical form, document order",
			html: `<a href="/a">1</a><a href="/b">2</a><a href="/a#x">3</a><a href="/./a">4</a><a href="HTTP://EXAMPLE.COM/a">5</a><a href="/a?utm_source=z">6</a>`,
			want: linksResult{URLs: []string{"http://example.com/a", "http://example.com/b"}},
		},
		{
			name:     "maxLinks",
			html:     `<a href="/1">1</a><a href="/1">1</a><a href="javascript:x">j</a><a href="/2">2</a><a href="/3">3</a>`,
			maxLinks: 2,
			want:     linksResult{URLs: []string{"http://example.com/1", "http://example.com/2"}},
		},
		{
			name: "link rel next prev alternate",
			html: `<link rel="stylesheet" href="/s.css"><link rel="alternate stylesheet" href="/alt.css"><link rel="icon" href="/i.ico">
				<link rel="next" href="/p3"><link rel="PREV" href="/p1"><link rel="alternate" hreflang="de" href="/de/">
				<link rel="canonical" href="/c"><link rel="next">`,
			want: linksResult{URLs: []string{"http://example.com/p3", "http://example.com/p1", "http://example.com/de/"}},
		},
		{
			name: "noscript and noframes content",
			html: `<noscript><a href="/ns">ns</a><meta name="x"></noscript><noframes><a href="/nf">nf</a></noframes><a href="/after">a</a>`,
			want: linksResult{URLs: []string{"http://example.com/ns", "http://example.com/nf", "http://example.com/after"}},
		},
		{
			name: "nofollow inside noscript",
			html: `<noscript><meta name="robots" content="nofollow"></noscript><a href="/x">x</a>`,
			want: linksResult{NoFollow: true},
		},
		{
			name: "script, style, textarea, comments are not markup",
			html: `<script>var s = '<a href="/js">';</script><style>a[href="/css"]{}</style>
				<textarea><a href="/ta"></a></textarea><!-- <a href="/comment"> --><title><a href="/t"></title><a href="/real">r</a>`,
			want: linksResult{URLs: []string{"http://example.com/real"}},
		},
		{
			name: "strip params and percent-encoding",
			html: `<a href="/x?utm_source=a&amp;id=1">x</a><a href="/é è">e</a><a href="/p;jsessionid=ABC">p</a>`,
			want: linksResult{URLs: []string{"http://example.com/x?id=1", "http://example.com/%C3%A9%20%C3%A8", "http://example.com/p"}},
		},
		{
			name: "broken markup",
			html: `<a href="/ok"<a href=/two><a href="/unterminated`,
			want: linksResult{URLs: []string{"http://example.com/ok"}},
		},
		{
			name: "empty document",
			html: ``,
			want: linksResult{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := toResult(c.ExtractLinks(doc, []byte(tt.html), tt.maxLinks))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ExtractLinks mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExtractLinksNilDocument(t *testing.T) {
	c := newTestCanon(t)
	got := toResult(c.ExtractLinks(nil, []byte(`<a href="/rel">r</a><a href="https://example.org/abs">a</a>`), 0))
	want := linksResult{URLs: []string{"https://example.org/abs"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
