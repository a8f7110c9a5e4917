package urlx

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

var benchURLs = []string{
	"http://example.com/",
	"https://www.example.com/blog/2024/05/some-article-title.html",
	"HTTP://WWW.Example.COM:80/a/./b/../c/index.html?utm_source=news&utm_medium=email&id=42#section",
	"https://shop.example.co.uk/search?q=running+shoes&size=42&color=blue&page=3",
	"http://bücher.de/kategorie/romane?sortierung=neu",
	"https://cdn.example.net/assets/img/%7Euser/photo%2fone.jpg",
}

func BenchmarkCanonicalize(b *testing.B) {
	c := newTestCanon(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := c.Canonicalize(benchURLs[i%len(benchURLs)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkResolve(b *testing.B) {
	c := newTestCanon(b)
	base, _ := url.Parse("https://www.example.com/blog/2024/05/article.html")
	refs := []string{"../04/other.html", "/about", "img/a.png", "?page=2", "https://other.example.org/x"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := c.Resolve(base, refs[i%len(refs)]); err != nil {
			b.Fatal(err)
		}
	}
}

// benchPage returns a realistic HTML page of about 15 KB with about 50
// links (relative, absolute, duplicates, javascript:, mailto:).
func benchPage() []byte {
	var sb strings.Builder
	sb.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Example page</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="index,follow">
<link rel="stylesheet" href="/static/css/site.css"><link rel="next" href="/blog/page/3">
<script>window.dataLayer = window.dataLayer || []; function gtag(){dataLayer.push(arguments);} gtag('js', new Date());</script>
<style>body{font-family:sans-serif;margin:0;padding:0}.nav a{color:#333;text-decoration:none}.content p{line-height:1.5}</style>
</head><body><div class="nav"><ul>`)
	for i := 0; i < 12; i++ {
		fmt.Fprintf(&sb, `<li class="nav-item"><a class="nav-link" href="/section/%d/">Section %d</a></li>`, i, i)
	}
	sb.WriteString(`</ul></div><div class="content">`)
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&sb, `<div class="post"><h2><a href="/blog/2024/%02d/post-title-number-%d.html?utm_source=home&amp;ref=%d">Post title number %d</a></h2>
<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat.</p>
<img src="/img/thumb-%d.jpg" alt="thumbnail" width="120" height="80"></div>`, i%12+1, i, i, i, i)
	}
	sb.WriteString(`</div><div class="footer">`)
	for i := 0; i < 6; i++ {
		fmt.Fprintf(&sb, `<a href="https://partner%d.example.org/landing?src=example">Partner %d</a> | `, i, i)
	}
	sb.WriteString(`<a href="mailto:info@example.com">Mail</a> <a href="javascript:void(0)" onclick="share()">Share</a>
<a href="#top">Top</a> <a href="/section/1/">Section 1 again</a></div></body></html>`)
	return []byte(sb.String())
}

func BenchmarkExtractLinks(b *testing.B) {
	c := newTestCanon(b)
	doc, _ := url.Parse("https://www.example.com/blog/page/2")
	page := benchPage()
	l := c.ExtractLinks(doc, page, 0)
	b.Logf("page %d bytes, %d links extracted", len(page), len(l.URLs))
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		c.ExtractLinks(doc, page, 0)
	}
}
