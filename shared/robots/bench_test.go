package robots

import (
	"net/url"
	"strings"
	"testing"
)

// benchRobots is a realistic robots.txt of 50 rules in four groups, modelled
// on those of large news and shop sites.
const benchRobots = `# robots.txt for www.example.com
User-agent: Googlebot
User-agent: Bingbot
Disallow: /search
Disallow: /*?sessionid=
Allow: /search/about
Disallow: /account/
Disallow: /cart

User-agent: GPTBot
User-agent: CCBot
Disallow: /

User-agent: AdsBot-Google
Allow: /
Disallow: /checkout/
Disallow: /*.json$

User-agent: *
Crawl-delay: 2
Disallow: /admin/
Disallow: /wp-admin/
Allow: /wp-admin/admin-ajax.php
Disallow: /cgi-bin/
Disallow: /tmp/
Disallow: /private/
Disallow: /account/
Disallow: /login
Disallow: /logout
Disallow: /register
Disallow: /cart
Disallow: /checkout/
Disallow: /basket
Disallow: /wishlist
Disallow: /compare
Disallow: /print/
Disallow: /*/print$
Disallow: /search
Allow: /search/about
Disallow: /*?q=
Disallow: /*&q=
Disallow: /*?sort=
Disallow: /*&sort=
Disallow: /*?filter=
Disallow: /*&filter=
Disallow: /*?sessionid=
Disallow: /*?utm_
Disallow: /*&utm_
Disallow: /*.pdf$
Disallow: /*.xls$
Disallow: /*/feed/
Disallow: /*/trackback/
Disallow: /tag/*/page/
Disallow: /api/
Allow: /api/public/
Disallow: /static/drafts/
Allow: /static/
Disallow: /*/amp$
Disallow: /user/*/settings
Disallow: /*/comments/*/reply
Allow: /*.css$

Sitemap: https://www.example.com/sitemap.xml
Sitemap: https://www.example.com/news-sitemap.xml
`

var benchURLs = []string{
	"https://www.example.com/",
	"https://www.example.com/news/2024/05/12/some-long-article-slug-about-things-123456",
	"https://www.example.com/products/shoes/running?colour=blue&size=42&sort=price",
	"https://www.example.com/category/books/page/17?utm_source=newsletter&utm_medium=email",
	"https://www.example.com/static/css/main.3f9a2c.css",
	"https://www.example.com/api/public/v1/items?id=42",
	"https://www.example.com/user/jane.doe/settings",
	"https://www.example.com/reports/annual-report-2023.pdf",
}

func TestBenchRobotsRuleCount(t *testing.T) {
	n := 0
	for _, line := range strings.Split(benchRobots, "\n") {
		if strings.HasPrefix(line, "Allow:") || strings.HasPrefix(line, "Disallow:") {
			n++
		}
	}
	if n != 50 {
		t.Errorf("benchRobots has %d rules, want 50", n)
	}
	r := Parse([]byte(benchRobots))
	want := []bool{true, true, false, false, true, true, false, false}
	for i, raw := range benchURLs {
		u, _ := url.Parse(raw)
		if got := r.Allowed(ua, u); got != want[i] {
			t.Errorf("Allowed(%q) = %v, want %v", raw, got, want[i])
		}
	}
}

func BenchmarkAllowed(b *testing.B) {
	r := Parse([]byte(benchRobots))
	urls := make([]*url.URL, len(benchURLs))
	for i, raw := range benchURLs {
		u, err := url.Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		urls[i] = u
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Allowed(ua, urls[i%len(urls)])
		i++
	}
}

func BenchmarkParse(b *testing.B) {
	body := []byte(benchRobots)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		Parse(body)
	}
}

func BenchmarkPathological(b *testing.B) {
	r := Parse([]byte("User-agent: *\nDisallow: /*a*a*a*a*a*a*a*a*a*a*a*a*b\n"))
	path := "/" + strings.Repeat("a", 10_000)
	b.ReportAllocs()
	for b.Loop() {
		r.AllowedPath(ua, path)
	}
}
