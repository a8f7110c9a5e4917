package urlx

import (
	"net/url"
	"strings"
	"testing"
)

var fuzzSeeds = []string{
	"http://example.com/",
	"HTTP://Example.COM:80/a/./b/../c?utm_source=x&b=1&&a=2#frag",
	"https://user:pa%3Ass@bücher.de:0443/%7e/x%2fy;jsessionid=1?q=%zz",
	"http://0x7f.1/", "http://[::ffff:1.2.3.4]:8080/", "http://1.2.3.08/",
	"http:\\\\x.com\\a\\..\\b", " \t http://x.com/a b\n", "http://x.com/?q='\"<>",
	"http://xn--bcher-kva.de./", "http://a..b/", "http://%41.com/", "http://é.com/ü?ü#ü",
	"http://x.com/..;jsessionid=1/", "http://x.com/?a=1;jsessionid=2;b&jsessionid=3",
	"http://x.com/%2e%2E/%2e", "http://x.com/a;sid=587fba8f825b05844526519fdb7d75c8?_sid=0123456789abcdefAB&sid=x",
	"javascript:alert(1)", "//x.com", "?q", "#f", "",
	"http://\u0661.com/", "http://\u200d.com/", "http://a\u0300.com/",
	"http://x.com/?b=2&a=1&b=1&&a", "http://x.com/?%62=1;a=2&=3&a",
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	c, err := NewCanonicalizer(DefaultStripParams())
	if err != nil {
		f.Fatal(err)
	}
	base, err := url.Parse("http://base.example/dir/page?x=1")
	if err != nil {
		f.Fatal(err)
	}
	sorted, err := NewCanonicalizerWith(Options{StripParams: DefaultStripParams(), SortQuery: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []*Canonicalizer{c, sorted} {
			if u, err := c.Canonicalize(s); err == nil {
				checkFuzzCanonical(t, c, s, u)
			}
			if u, err := c.Resolve(base, s); err == nil {
				checkFuzzCanonical(t, c, s, u)
			}
		}
	})
}

// checkFuzzCanonical checks the invariants of a canonical URL u obtained
// from input s.
func checkFuzzCanonical(t *testing.T, c *Canonicalizer, s string, u *url.URL) {
	t.Helper()
	str := u.String()
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.Fragment != "" {
		t.Fatalf("%q -> %q: scheme %q host %q fragment %q", s, str, u.Scheme, u.Host, u.Fragment)
	}
	if len(str) > MaxURLLength {
		t.Fatalf("%q -> %d bytes", s, len(str))
	}
	again, err := c.Canonicalize(str)
	if err != nil {
		t.Fatalf("%q -> %q, which does not canonicalize: %v", s, str, err)
	}
	if again.String() != str {
		t.Fatalf("not idempotent: %q -> %q -> %q", s, str, again.String())
	}
	p, err := url.Parse(str)
	if err != nil || p.String() != str {
		t.Fatalf("%q -> %q: url.Parse round trip gives %v, %v", s, str, p, err)
	}
	// the frontier's functions check a queued URL against its host key
	// by comparing the key with the URL's authority (after any user
	// info), and the scope host
	// with the key's host part: both hold for every canonical URL
	scheme, rest, _ := strings.Cut(str, "://")
	authority := rest[:strings.IndexAny(rest+"/", "/?#")]
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = authority[at+1:] // user info
	}
	if key := HostKey(u); key != authority || scheme != u.Scheme {
		t.Fatalf("%q -> %q: authority %q, host key %q", s, str, authority, key)
	}
	if sh := strings.ToLower(u.Hostname()); authority != sh && !strings.HasPrefix(authority, sh+":") &&
		authority != "["+sh+"]" && !strings.HasPrefix(authority, "["+sh+"]:") {
		t.Fatalf("%q -> %q: authority %q, scope host %q", s, str, authority, sh)
	}
	_ = Fingerprint(str)
}

func FuzzExtractLinks(f *testing.F) {
	for _, s := range []string{
		`<a href="/a">a</a><a href="b?utm_source=1">b</a>`,
		`<base href="//cdn.example.net/x/"><iframe src="f"></iframe><area href="../g">`,
		`<meta name=robots content=nofollow><a href=/x>`,
		`<noscript><a href="/ns"><noscript><a href="/deep"></noscript></noscript>`,
		`<link rel="next prev" href="?p=2"><a href="javascript:x">`,
		`<a href="&#x68;ttp://e.com/&amp;">`,
		"<a href=\"\x00http://x\t.com/\">",
	} {
		f.Add([]byte(s), 0)
	}
	c, err := NewCanonicalizer(DefaultStripParams())
	if err != nil {
		f.Fatal(err)
	}
	doc, err := url.Parse("http://example.com/dir/page.html")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, maxLinks int) {
		maxLinks %= 8
		l := c.ExtractLinks(doc, body, maxLinks)
		if l.NoFollow && len(l.URLs) > 0 {
			t.Fatalf("NoFollow with %d links", len(l.URLs))
		}
		if maxLinks > 0 && len(l.URLs) > maxLinks {
			t.Fatalf("%d links, max %d", len(l.URLs), maxLinks)
		}
		if l.BaseHref != "" {
			if b, err := c.Canonicalize(l.BaseHref); err != nil || b.String() != l.BaseHref {
				t.Fatalf("BaseHref %q not canonical: %v", l.BaseHref, err)
			}
		}
		seen := map[string]bool{}
		for _, u := range l.URLs {
			s := u.String()
			if seen[s] {
				t.Fatalf("duplicate link %q", s)
			}
			seen[s] = true
			checkFuzzCanonical(t, c, s, u)
		}
	})
}
