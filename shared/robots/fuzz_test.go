package robots

import (
	"net/url"
	"testing"
)

func FuzzParse(f *testing.F) {
	seeds := []struct{ body, agent, path string }{
		{"User-agent: *\nDisallow: /\n", ua, "/"},
		{"\xef\xbb\xbfUser-agent: FooBot\r\nAllow: /x/\r\nDisallow: /\r\n", "FooBot", "/x/y"},
		{"user-agent: a\nuser-agent: b\ndisallow: /*a*a*a*a*b$\nallow: /index.html\ncrawl-delay: 0.5\nsitemap: https://x/s.xml\n", "b/1.0", "/aaaaaaaaaaaaab"},
		{"User-agent: *\nDisallow: /caf\xc3\xa9%2f$\nDisallow /x\nfoo bar baz\n# c\n:\n", "", "/caf%C3%A9%2F"},
		{"User-agent: * x\nDisallow: $\nAllow: *\nDisallow: ***$$\n", "*", "?q"},
		{"", "", ""},
	}
	for _, s := range seeds {
		f.Add([]byte(s.body), s.agent, s.path)
	}
	f.Fuzz(func(t *testing.T, body []byte, agent, path string) {
		r := Parse(body)
		got := r.AllowedPath(agent, path)
		if again := Parse(body).AllowedPath(agent, path); again != got {
			t.Fatalf("AllowedPath differs between two parses: %v then %v", got, again)
		}
		if !r.AllowedPath(agent, "/robots.txt") {
			t.Fatal("/robots.txt disallowed")
		}
		if d := r.CrawlDelay(agent); d < 0 {
			t.Fatalf("CrawlDelay = %v < 0", d)
		}
		for _, s := range r.Sitemaps() {
			if s == "" {
				t.Fatal("empty sitemap")
			}
		}
		if u, err := url.Parse("https://example.org" + path); err == nil {
			_ = r.Allowed(agent, u)
		}

		// Every compiled rule agrees with Google's reference matcher.
		p := normalizePath(path)
		check := func(gs []*group) {
			for _, g := range gs {
				for i := range g.rules {
					ru := &g.rules[i]
					pattern := patternOf(ru)
					if len(pattern)*len(p) > 1<<20 {
						continue
					}
					if m, want := ru.match(p), refMatch(p, pattern); m != want {
						t.Fatalf("rule %q on %q: match = %v, reference %v", pattern, p, m, want)
					}
				}
			}
		}
		check(r.global)
		for _, gs := range r.agents {
			check(gs)
		}
	})
}

// patternOf rebuilds the pattern a rule was compiled from, less runs of "*"
// (which do not change what it matches).
func patternOf(ru *rule) string {
	s := ru.segs[0]
	for _, seg := range ru.segs[1:] {
		s += "*" + seg
	}
	if ru.anchored {
		s += "$"
	}
	return s
}

func FuzzMatch(f *testing.F) {
	f.Add("/*a*a*a*b$", "/aaaab")
	f.Add("/a$b$", "/a$b")
	f.Add("*", "")
	f.Add("/fish*.php", "/fishheads/catfish.php?parameters")
	f.Fuzz(func(t *testing.T, pattern, path string) {
		if len(pattern)*len(path) > 1<<20 {
			t.Skip("too large for the reference matcher")
		}
		ru := compile(pattern, false)
		if got, want := ru.match(path), refMatch(path, pattern); got != want {
			t.Fatalf("match(path %q, pattern %q) = %v, reference %v", path, pattern, got, want)
		}
	})
}
