package robots

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const ua = "redcrawl/0.1 (+https://example.org)"

// check is one AllowedPath query against a robots.txt.
type check struct {
	agent string // defaults to ua
	path  string
	want  bool
}

// runChecks parses body and compares every check's answer, reporting all
// differences as one diff.
func runChecks(t *testing.T, r *Robots, checks []check) {
	t.Helper()
	type answer struct {
		Agent, Path string
		Allowed     bool
	}
	var got, want []answer
	for _, c := range checks {
		agent := c.agent
		if agent == "" {
			agent = ua
		}
		got = append(got, answer{agent, c.path, r.AllowedPath(agent, c.path)})
		want = append(want, answer{agent, c.path, c.want})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AllowedPath answers (-want +got):\n%s", diff)
	}
}

func TestAllowedPath(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		checks []check
	}{
		{
			name: "groups for the same agent merge",
			body: "User-agent: redcrawl\nDisallow: /a/\n\nUser-agent: other\nDisallow: /\n\nUser-agent: RedCrawl\nDisallow: /b/\n",
			checks: []check{
				{path: "/a/x", want: false},
				{path: "/b/x", want: false},
				{path: "/c/x", want: true},
				{agent: "other", path: "/c/x", want: false},
			},
		},
		{
			name: "consecutive user-agent lines share a group",
			body: "User-agent: a\nUser-agent: redcrawl\n\nUser-agent: b\nDisallow: /x\nUser-agent: c\nDisallow: /y\n",
			checks: []check{
				{path: "/x", want: false},
				{path: "/y", want: true},
				{agent: "a", path: "/x", want: false},
				{agent: "c", path: "/x", want: true},
				{agent: "c", path: "/y", want: false},
			},
		},
		{
			name: "unknown records and sitemaps do not split a group",
			body: "User-agent: a\nFoo: bar\nSitemap: https://x/s.xml\n\nUser-agent: redcrawl\nDisallow: /x\n",
			checks: []check{
				{agent: "a", path: "/x", want: false},
				{path: "/x", want: false},
			},
		},
		{
			name: "specific group beats the global one entirely",
			body: "User-agent: *\nDisallow: /\n\nUser-agent: redcrawl\nDisallow: /private\n",
			checks: []check{
				{path: "/public", want: true},
				{path: "/private", want: false},
				{agent: "otherbot/1.0", path: "/public", want: false},
			},
		},
		{
			name: "specific group without rules allows all",
			body: "User-agent: *\nDisallow: /\n\nUser-agent: redcrawl\nAllow:\n",
			checks: []check{
				{path: "/x", want: true},
				{agent: "other", path: "/x", want: false},
			},
		},
		{
			name: "crawl-delay ends the user-agent list",
			body: "User-agent: *\nCrawl-delay: 5\n\nUser-agent: badbot\nDisallow: /\n",
			checks: []check{
				{path: "/x", want: true},
				{agent: "BadBot/1.0", path: "/x", want: false},
			},
		},
		{
			name: "no matching group allows all",
			body: "User-agent: a\nDisallow: /\n",
			checks: []check{
				{path: "/", want: true},
				{path: "/x", want: true},
			},
		},
		{
			name: "rules before any user-agent are ignored",
			body: "Disallow: /\nUser-agent: *\nDisallow: /x\n",
			checks: []check{
				{path: "/y", want: true},
				{path: "/x", want: false},
			},
		},
		{
			name: "product token is the leading [A-Za-z_-] run, case-insensitive",
			body: "User-agent: RedCrawl-News/2.0\nDisallow: /news\nUser-agent: REDCRAWL\nDisallow: /\n",
			checks: []check{
				{path: "/x", want: false},
				{agent: "redcrawl-news/1", path: "/news", want: false},
				{agent: "redcrawl-news/1", path: "/x", want: true},
				{agent: "redcrawl_x", path: "/x", want: true},
				{agent: "123bot", path: "/x", want: true},
			},
		},
		{
			name: "star followed by text is still the global group",
			body: "User-agent: * # everyone\nDisallow: /x\nUser-agent: *bot\nDisallow: /y\n",
			checks: []check{
				{path: "/x", want: false},
				{path: "/y", want: true},
			},
		},
		{
			name: "longest match wins regardless of order",
			body: "User-agent: *\nAllow: /a/b/c\nDisallow: /a/b\nAllow: /a\nDisallow: /\n",
			checks: []check{
				{path: "/", want: false},
				{path: "/a", want: true},
				{path: "/a/b", want: false},
				{path: "/a/b/c/d", want: true},
				{path: "/z", want: false},
			},
		},
		{
			name: "match length counts wildcards and anchors",
			body: "User-agent: *\nDisallow: /*.pdf$\nAllow: /docs/\n",
			checks: []check{
				// "/*.pdf$" is 7 octets, "/docs/" 6: the disallow wins.
				{path: "/docs/a.pdf", want: false},
				{path: "/docs/a.pdf?x", want: true},
				{path: "/a.pdf", want: false},
			},
		},
		{
			name: "allow wins a tie",
			body: "User-agent: *\nDisallow: /page\nAllow: /page\nDisallow: /*.htm\nAllow: /x/*.h\n",
			checks: []check{
				{path: "/page", want: true},
				{path: "/x/a.htm", want: true}, // "/*.htm" and "/x/*.h" are both 6 octets
				{path: "/y/a.htm", want: false},
			},
		},
		{
			name: "allow wins a tie across merged groups",
			body: "User-agent: redcrawl\nDisallow: /p\n\nUser-agent: x\nDisallow: /\n\nUser-agent: redcrawl\nAllow: /p\n",
			checks: []check{
				{path: "/p", want: true},
			},
		},
		{
			name: "dollar anchors only at the end",
			body: "User-agent: *\nDisallow: /$\nDisallow: /a$b\nDisallow: /c$$\nDisallow: /exact$\n",
			checks: []check{
				{path: "/", want: false},
				{path: "/?q", want: true},
				{path: "/a$b", want: false},
				{path: "/ab", want: true},
				{path: "/c$", want: false},
				{path: "/c$x", want: true},
				{path: "/exact", want: false},
				{path: "/exact/", want: true},
			},
		},
		{
			name: "wildcards",
			body: "User-agent: *\nDisallow: /*/private/\nDisallow: /*?sid=\nDisallow: /**x**y*$\nDisallow: *.gif\n",
			checks: []check{
				{path: "/u/private/a", want: false},
				{path: "/private/a", want: true},
				{path: "//private/", want: false},
				{path: "/p?sid=1", want: false},
				{path: "/p?x=1&sid=1", want: true},
				{path: "/axbyc", want: false},
				{path: "/ayxb", want: true},
				{path: "/a/b.gif", want: false},
			},
		},
		{
			name: "empty disallow allows",
			body: "User-agent: *\nDisallow:\n",
			checks: []check{
				{path: "/", want: true},
				{path: "/x", want: true},
			},
		},
		{
			name: "patterns are case-sensitive, record names are not",
			body: "uSeR-aGeNt: *\nDISALLOW: /Private\n",
			checks: []check{
				{path: "/Private", want: false},
				{path: "/private", want: true},
			},
		},
		{
			name: "percent-encoding is normalized, never decoded",
			body: "User-agent: *\nDisallow: /caf\xc3\xa9\nDisallow: /a%2fb\nDisallow: /%7Euser\n",
			checks: []check{
				{path: "/caf%C3%A9", want: false},
				{path: "/caf%c3%a9/menu", want: false},
				{path: "/a%2Fb", want: false},
				{path: "/a%2fb", want: false},
				{path: "/a/b", want: true},
				{path: "/~user", want: true},
				{path: "/%7euser", want: false},
			},
		},
		{
			name: "google typos and missing colons",
			body: "user agent: *\ndissallow: /a\nDisalow /b\nDisallow /c /d\nuseragent:x\nallow:/\n",
			checks: []check{
				{path: "/a", want: false},
				{path: "/b", want: false},
				{path: "/c", want: true},
				{agent: "x", path: "/a", want: true},
			},
		},
		{
			name: "comments and whitespace",
			body: "# hello\n  User-agent :\t* # all\n\tDisallow : /x # not /\n#Disallow: /\n",
			checks: []check{
				{path: "/x", want: false},
				{path: "/y", want: true},
			},
		},
		{
			name: "line endings CR LF CRLF",
			body: "User-agent: *\rDisallow: /cr\nDisallow: /lf\r\nDisallow: /crlf\r\n\r\nDisallow: /after-blank",
			checks: []check{
				{path: "/cr", want: false},
				{path: "/lf", want: false},
				{path: "/crlf", want: false},
				{path: "/after-blank", want: false},
				{path: "/other", want: true},
			},
		},
		{
			name: "junk lines are ignored",
			body: "<html><body>\n:::\n: /x\nUser-agent: *\n\x00\xff\xfe garbage here\nDisallow: /x\n</html>",
			checks: []check{
				{path: "/x", want: false},
				{path: "/y", want: true},
			},
		},
		{
			name: "index.html allows its directory (Google)",
			body: "User-agent: *\nAllow: /d/index.html\nDisallow: /\n",
			checks: []check{
				{path: "/d/", want: true},
				{path: "/d/index.html", want: true},
				{path: "/d/other", want: false},
			},
		},
		{
			name: "path forms",
			body: "User-agent: *\nDisallow: /\nAllow: /$\nAllow: /?ok\n",
			checks: []check{
				{path: "", want: true},
				{path: "/", want: true},
				{path: "?ok=1", want: true},
				{path: "/x", want: false},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runChecks(t, Parse([]byte(tt.body)), tt.checks)
		})
	}
}

func TestRobotsTxtAlwaysAllowed(t *testing.T) {
	for name, r := range map[string]*Robots{
		"DisallowAll": DisallowAll(),
		"Parse":       Parse([]byte("User-agent: *\nDisallow: /\nDisallow: /robots.txt$\n")),
	} {
		t.Run(name, func(t *testing.T) {
			runChecks(t, r, []check{
				{path: "/robots.txt", want: true},
				{path: "/robots.txt?x=1", want: true},
				{path: "/robots.txt.bak", want: false},
				{path: "/x/robots.txt", want: false},
			})
		})
	}
}

func TestAllowAllDisallowAll(t *testing.T) {
	paths := []string{"/", "/a", "/a/b?c=d", ""}
	for _, p := range paths {
		if !AllowAll().AllowedPath(ua, p) {
			t.Errorf("AllowAll().AllowedPath(%q) = false", p)
		}
		if DisallowAll().AllowedPath(ua, p) {
			t.Errorf("DisallowAll().AllowedPath(%q) = true", p)
		}
		if DisallowAll().AllowedPath("", p) {
			t.Errorf("DisallowAll().AllowedPath(\"\", %q) = true", p)
		}
	}
	for _, r := range []*Robots{AllowAll(), DisallowAll()} {
		if d := r.CrawlDelay(ua); d != 0 {
			t.Errorf("CrawlDelay = %v, want 0", d)
		}
		if s := r.Sitemaps(); len(s) != 0 {
			t.Errorf("Sitemaps = %q, want none", s)
		}
	}
}

func TestAllowed(t *testing.T) {
	r := Parse([]byte("User-agent: *\nDisallow: /a%20b\nDisallow: /*?q=1$\nDisallow: /%E3%83%84\nDisallow: /x*\n"))
	tests := []struct {
		url  string
		want bool
	}{
		{"https://example.org/a%20b", false},
		{"https://example.org/a b", false}, // encoded by net/url
		{"https://example.org/p?q=1", false},
		{"https://example.org/p?q=1#frag", false},
		{"https://example.org/p?q=12", true},
		{"https://example.org/\u30c4", false},
		{"https://example.org/%e3%83%84", false},
		{"https://example.org", true},
		{"https://example.org?q=1", false},
		{"https://example.org/robots.txt", true},
		{"https://example.org/x", false},
		{"https://example.org/y#/x", true},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatalf("parse %q: %v", tt.url, err)
		}
		if got := r.Allowed(ua, u); got != tt.want {
			t.Errorf("Allowed(%q) = %v, want %v", tt.url, got, tt.want)
		}
	}
	if !r.Allowed(ua, nil) {
		t.Errorf("Allowed(nil) = false, want the answer for \"/\" (true)")
	}
}

func TestCrawlDelay(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		agent string
		want  time.Duration
	}{
		{"none", "User-agent: *\nDisallow: /x\n", ua, 0},
		{"integer", "User-agent: *\nCrawl-delay: 10\n", ua, 10 * time.Second},
		{"fractional", "User-agent: *\nCrawl-delay: 0.5\n", ua, 500 * time.Millisecond},
		{"leading dot", "User-agent: *\nCrawl-delay: .25\n", ua, 250 * time.Millisecond},
		{"trailing dot", "User-agent: *\ncrawl-delay: 3.\n", ua, 3 * time.Second},
		{"zero", "User-agent: *\nCrawl-delay: 0\n", ua, 0},
		{"non-numeric", "User-agent: *\nCrawl-delay: soon\n", ua, 0},
		{"negative", "User-agent: *\nCrawl-delay: -5\n", ua, 0},
		{"unit suffix", "User-agent: *\nCrawl-delay: 5s\n", ua, 0},
		{"comma", "User-agent: *\nCrawl-delay: 1,5\n", ua, 0},
		{"nan", "User-agent: *\nCrawl-delay: NaN\n", ua, 0},
		{"inf", "User-agent: *\nCrawl-delay: Inf\n", ua, 0},
		{"hex float", "User-agent: *\nCrawl-delay: 0x10\n", ua, 0},
		{"two dots", "User-agent: *\nCrawl-delay: 1.2.3\n", ua, 0},
		{"comment", "User-agent: *\nCrawl-delay: 2 # be nice\n", ua, 2 * time.Second},
		{"huge is clamped", "User-agent: *\nCrawl-delay: 99999999999999999999\n", ua, time.Duration(1<<63 - 1)},
		{"before any group", "Crawl-delay: 5\nUser-agent: *\nDisallow: /\n", ua, 0},
		{"specific group wins", "User-agent: *\nCrawl-delay: 1\n\nUser-agent: redcrawl\nCrawl-delay: 7\n", ua, 7 * time.Second},
		{"specific group without delay", "User-agent: *\nCrawl-delay: 1\n\nUser-agent: redcrawl\nDisallow: /x\n", ua, 0},
		{"global for others", "User-agent: *\nCrawl-delay: 1\n\nUser-agent: redcrawl\nCrawl-delay: 7\n", "otherbot", time.Second},
		{"after the rules", "User-agent: redcrawl\nDisallow: /x\nCrawl-delay: 4\n", ua, 4 * time.Second},
		{"shared by the group's agents", "User-agent: a\nUser-agent: redcrawl\nCrawl-delay: 3\nDisallow: /\n", ua, 3 * time.Second},
		{"largest of merged groups", "User-agent: redcrawl\nCrawl-delay: 2\nDisallow: /a\n\nUser-agent: redcrawl\nCrawl-delay: 9\n\nUser-agent: x\nCrawl-delay: 30\n", ua, 9 * time.Second},
		{"typo", "User-agent: *\nCrawl delay: 3\n", ua, 3 * time.Second},
		{"ends the user-agent list", "User-agent: *\nCrawl-delay: 5\n\nUser-agent: badbot\nDisallow: /\n", ua, 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Parse([]byte(tt.body)).CrawlDelay(tt.agent); got != tt.want {
				t.Errorf("CrawlDelay(%q) = %v, want %v", tt.agent, got, tt.want)
			}
		})
	}
}

func TestSitemaps(t *testing.T) {
	body := "Sitemap: https://example.org/a.xml\n" +
		"User-agent: *\n" +
		"Disallow: /x\n" +
		"sitemap:https://example.org/b.xml # comment\n" +
		"Site-map: https://example.org/c.xml\n" +
		"Sitemap:\n" +
		"Sitemap: https://example.org/a.xml\n" +
		"User-agent: other\n" +
		"SITEMAP: https://example.org/Caf\xc3\xa9.xml\n"
	r := Parse([]byte(body))
	want := []string{
		"https://example.org/a.xml",
		"https://example.org/b.xml",
		"https://example.org/c.xml",
		"https://example.org/Caf\xc3\xa9.xml",
	}
	if diff := cmp.Diff(want, r.Sitemaps()); diff != "" {
		t.Errorf("Sitemaps (-want +got):\n%s", diff)
	}
	// The result belongs to the caller.
	r.Sitemaps()[0] = "changed"
	if got := r.Sitemaps()[0]; got != want[0] {
		t.Errorf("Sitemaps()[0] = %q after the caller changed its copy", got)
	}
	// Sitemaps do not break the group around them.
	if r.AllowedPath(ua, "/x") {
		t.Errorf("/x allowed; Disallow: /x lost")
	}
}

func TestBOM(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"full BOM", "\xef\xbb\xbfUser-agent: *\nDisallow: /x\n"},
		{"partial BOM", "\xef\xbbUser-agent: *\nDisallow: /x\n"},
		{"BOM then CRLF", "\xef\xbb\xbf\r\nUser-agent: *\r\nDisallow: /x\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runChecks(t, Parse([]byte(tt.body)), []check{{path: "/x", want: false}, {path: "/y", want: true}})
		})
	}
	// A BOM elsewhere is not skipped: the line is junk.
	runChecks(t, Parse([]byte("User-agent: *\n\xef\xbb\xbfDisallow: /x\n")), []check{{path: "/x", want: true}})
}

// padTo appends a comment to b so that it is n bytes long, ending in a
// line break.
func padTo(t *testing.T, b *strings.Builder, n int) {
	t.Helper()
	pad := n - b.Len() - 1
	if pad < 1 {
		t.Fatalf("test setup: already %d bytes, cannot pad to %d", b.Len(), n)
	}
	b.WriteString("#" + strings.Repeat("x", pad-1) + "\n")
}

func TestBodyLimit(t *testing.T) {
	t.Run("rules past the limit are ignored", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("User-agent: *\nDisallow: /first\n")
		padTo(t, &b, maxBodySize-len("Disallow: /in\n"))
		b.WriteString("Disallow: /in\n") // ends exactly at the limit
		b.WriteString("Disallow: /past\n")
		runChecks(t, Parse([]byte(b.String())), []check{
			{path: "/first", want: false},
			{path: "/in", want: false},
			{path: "/past", want: true},
		})
	})
	t.Run("the line the limit cuts is dropped", func(t *testing.T) {
		// Read truncated, "Allow: /secret" would be "Allow: /" and allow
		// everything.
		var b strings.Builder
		b.WriteString("User-agent: *\nDisallow: /\n")
		padTo(t, &b, maxBodySize-len("Allow: /"))
		b.WriteString("Allow: /secret\n")
		runChecks(t, Parse([]byte(b.String())), []check{
			{path: "/x", want: false},
			{path: "/secret", want: false},
		})
	})
	t.Run("a cut line without a line break before it", func(t *testing.T) {
		body := "User-agent: * Disallow: /" + strings.Repeat("z", maxBodySize)
		runChecks(t, Parse([]byte(body)), []check{{path: "/", want: true}})
	})
}

func TestHugeLine(t *testing.T) {
	// Lines are truncated at maxLineLen bytes, as Google does.
	long := "/x/" + strings.Repeat("a", 3*maxLineLen)
	prefix := "Disallow: "
	kept := long[:maxLineLen-len(prefix)]
	r := Parse([]byte("User-agent: *\n" + prefix + long + "/end\nDisallow: /after\n"))
	runChecks(t, r, []check{
		{path: kept, want: false},
		{path: kept[:len(kept)-1], want: true},
		{path: "/after", want: false},
		{path: "/x/", want: true},
	})
}

func TestPathological(t *testing.T) {
	pattern := "/*a*a*a*a*a*a*a*a*a*a*a*a*b"
	r := Parse([]byte("User-agent: *\nDisallow: " + pattern + "\nDisallow: /*a*a*a*a*a*a*a*a*a*a*a*a*b$\n"))
	path := "/" + strings.Repeat("a", 200_000)
	start := time.Now()
	for range 20 {
		if !r.AllowedPath(ua, path) {
			t.Fatalf("AllowedPath(%q…) = false, want true", path[:10])
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("20 matches of %q against a %d-byte path took %v", pattern, len(path), el)
	}
	if r.AllowedPath(ua, path+"b") {
		t.Errorf("pattern %q does not match a path ending in b", pattern)
	}
}

// refMatch is Google's reference matcher (RobotsMatchStrategy::Matches), a
// position-set simulation in O(len(path)·len(pattern)), used to check ours.
func refMatch(path, pattern string) bool {
	pos := make([]int, len(path)+1)
	n := 1
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		if c == '$' && i+1 == len(pattern) {
			return pos[n-1] == len(path)
		}
		if c == '*' {
			n = len(path) - pos[0] + 1
			for j := 1; j < n; j++ {
				pos[j] = pos[j-1] + 1
			}
			continue
		}
		m := 0
		for j := 0; j < n; j++ {
			if pos[j] < len(path) && path[pos[j]] == c {
				pos[m] = pos[j] + 1
				m++
			}
		}
		n = m
		if n == 0 {
			return false
		}
	}
	return true
}

func TestMatchAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab/*$"
	gen := func(n int, alpha string) string {
		b := make([]byte, rng.IntN(n+1))
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return string(b)
	}
	for range 200_000 {
		pattern := gen(8, alphabet)
		path := gen(10, "ab/$")
		ru := compile(pattern, false)
		if got, want := ru.match(path), refMatch(path, pattern); got != want {
			t.Fatalf("match(path %q, pattern %q) = %v, reference says %v", path, pattern, got, want)
		}
	}
}

func TestCompile(t *testing.T) {
	type compiled struct {
		Segs     []string
		Anchored bool
		Prio     int
	}
	tests := []struct {
		pattern string
		want    compiled
	}{
		{"/a", compiled{[]string{"/a"}, false, 2}},
		{"/a$", compiled{[]string{"/a"}, true, 3}},
		{"/a*", compiled{[]string{"/a", ""}, false, 3}},
		{"*", compiled{[]string{"", ""}, false, 1}},
		{"/a***b**c*", compiled{[]string{"/a", "b", "c", ""}, false, 10}},
		{"/*.php$", compiled{[]string{"/", ".php"}, true, 7}},
		{"/a$b$", compiled{[]string{"/a$b"}, true, 5}},
	}
	for _, tt := range tests {
		r := compile(tt.pattern, false)
		got := compiled{r.segs, r.anchored, r.prio}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("compile(%q) (-want +got):\n%s", tt.pattern, diff)
		}
	}
}

func TestEscapePattern(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/a/b", "/a/b"},
		{"/SanJos\xc3\xa9Sellers", "/SanJos%C3%A9Sellers"},
		{"/%aa%Bc%dd", "/%AA%BC%DD"},
		{"/%zz%a", "/%zz%a"},
		{"/100%", "/100%"},
		{"/\u30c4", "/%E3%83%84"},
	}
	for _, tt := range tests {
		if got := escapePattern([]byte(tt.in)); got != tt.want {
			t.Errorf("escapePattern(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	r := Parse([]byte("User-agent: *\nDisallow: /a\nCrawl-delay: 1\nSitemap: https://x/s.xml\n"))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 1000 {
				p := fmt.Sprintf("/a/%d/%d", i, j)
				if r.AllowedPath(ua, p) {
					t.Errorf("%s allowed", p)
					return
				}
				_ = r.CrawlDelay(ua)
				_ = r.Sitemaps()
			}
		})
	}
	wg.Wait()
}
