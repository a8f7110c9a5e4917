package urlx

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/robots"
)

// metaResult is what ExtractLinksWith found about a document itself.
type metaResult struct {
	URLs        []string
	NoFollow    bool
	Robots      robots.Directives
	Canonical   string
	RelNoFollow int
}

func TestExtractLinksRobotsMeta(t *testing.T) {
	c := newTestCanon(t)
	doc, err := url.Parse("http://example.com/dir/page.html")
	if err != nil {
		t.Fatal(err)
	}
	ours := LinkOptions{MetaNames: []string{"redcrawl"}}
	rel := LinkOptions{MetaNames: []string{"redcrawl"}, ObeyRelNoFollow: true}
	tests := []struct {
		name string
		html string
		opt  LinkOptions
		want metaResult
	}{
		{
			name: "no meta",
			html: `<a href="/a">a</a>`,
			want: metaResult{URLs: []string{"http://example.com/a"}},
		},
		{
			name: "noindex keeps links",
			html: `<meta name="robots" content="noindex"><a href="/a">a</a>`,
			want: metaResult{URLs: []string{"http://example.com/a"}, Robots: robots.Directives{NoIndex: true}},
		},
		{
			name: "none",
			html: `<meta name="Robots" content="NONE"><a href="/a">a</a>`,
			want: metaResult{NoFollow: true, Robots: robots.Directives{NoIndex: true, NoFollow: true}},
		},
		{
			name: "several tags combine, most restrictive wins",
			html: `<meta name="robots" content="index, follow"><meta name="robots" content="noarchive">` +
				`<a href="/a">a</a><meta name="robots" content="nofollow">`,
			want: metaResult{NoFollow: true, Robots: robots.Directives{NoFollow: true, NoArchive: true}},
		},
		{
			name: "our product token",
			html: `<meta name="REDCRAWL" content="noindex"><a href="/a">a</a>`,
			opt:  ours,
			want: metaResult{URLs: []string{"http://example.com/a"}, Robots: robots.Directives{NoIndex: true}},
		},
		{
			name: "our token not configured",
			html: `<meta name="redcrawl" content="noindex"><a href="/a">a</a>`,
			want: metaResult{URLs: []string{"http://example.com/a"}},
		},
		{
			name: "another crawler's tag",
			html: `<meta name="googlebot" content="noindex, nofollow"><a href="/a">a</a>`,
			opt:  ours,
			want: metaResult{URLs: []string{"http://example.com/a"}},
		},
		{
			name: "robots and ours combine",
			html: `<meta name="robots" content="noarchive"><meta name="redcrawl" content="nofollow"><a href="/a">a</a>`,
			opt:  ours,
			want: metaResult{NoFollow: true, Robots: robots.Directives{NoFollow: true, NoArchive: true}},
		},
		{
			name: "meta inside noscript",
			html: `<noscript><meta name="robots" content="noindex"></noscript><a href="/a">a</a>`,
			want: metaResult{URLs: []string{"http://example.com/a"}, Robots: robots.Directives{NoIndex: true}},
		},
		{
			name: "canonical in head, relative",
			html: `<head><link rel="canonical" href="../other.html?x=1#top"></head><a href="/a">a</a>`,
			want: metaResult{URLs: []string{"http://example.com/a"}, Canonical: "http://example.com/other.html?x=1"},
		},
		{
			name: "canonical without head tags, first wins",
			html: `<title>t</title><link rel="Canonical" href="/one"><link rel="canonical" href="/two"><p>x</p>`,
			want: metaResult{Canonical: "http://example.com/one"},
		},
		{
			name: "canonical in body ignored",
			html: `<html><head><title>t</title></head><body><link rel="canonical" href="/evil"><a href="/a">a</a></body>`,
			want: metaResult{URLs: []string{"http://example.com/a"}},
		},
		{
			name: "canonical after text ignored",
			html: `hello <link rel="canonical" href="/evil">`,
			want: metaResult{},
		},
		{
			name: "canonical not http",
			html: `<link rel="canonical" href="mailto:x@example.com">`,
			want: metaResult{},
		},
		{
			name: "canonical kept with nofollow",
			html: `<link rel="canonical" href="/c"><meta name="robots" content="nofollow"><a href="/a">a</a>`,
			want: metaResult{NoFollow: true, Robots: robots.Directives{NoFollow: true}, Canonical: "http://example.com/c"},
		},
		{
			name: "robots ignored",
			html: `<meta name="robots" content="none"><a href="/a">a</a>`,
			opt:  LinkOptions{IgnoreRobots: true},
			want: metaResult{URLs: []string{"http://example.com/a"}, Robots: robots.Directives{NoIndex: true, NoFollow: true}},
		},
		{
			name: "rel nofollow followed by default",
			html: `<a href="/a" rel="nofollow">a</a><a href="/b" rel="ugc">b</a><a href="/c" rel="sponsored">c</a>`,
			want: metaResult{URLs: []string{"http://example.com/a", "http://example.com/b", "http://example.com/c"}},
		},
		{
			name: "rel nofollow, ugc, sponsored obeyed",
			html: `<a href="/a" rel="nofollow">a</a><a href="/b" rel="external UGC">b</a><area href="/c" rel="sponsored">` +
				`<a href="/d" rel="noopener">d</a><a href="/e">e</a>`,
			opt:  rel,
			want: metaResult{URLs: []string{"http://example.com/d", "http://example.com/e"}, RelNoFollow: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := c.ExtractLinksWith(doc, []byte(tt.html), tt.opt)
			got := metaResult{NoFollow: l.NoFollow, Robots: l.Robots, Canonical: l.Canonical, RelNoFollow: l.RelNoFollow}
			for _, u := range l.URLs {
				got.URLs = append(got.URLs, u.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ExtractLinksWith mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
