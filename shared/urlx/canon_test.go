package urlx

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func newTestCanon(t testing.TB) *Canonicalizer {
	t.Helper()
	c, err := NewCanonicalizer(DefaultStripParams())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// result is a URL or the fact that it was rejected.
type result struct {
	URL string
	Err bool
}

func canonResult(c *Canonicalizer, raw string) result {
	u, err := c.Canonicalize(raw)
	if err != nil {
		return result{Err: true}
	}
	return result{URL: u.String()}
}

func ok(s string) result { return result{URL: s} }

var rejected = result{Err: true}

func TestCanonicalize(t *testing.T) {
	c := newTestCanon(t)
	tests := []struct {
		in   string
		want result
	}{
		// scheme, host, port, empty path
		{"HTTP://Example.COM", ok("http://example.com/")},
		{"hTTpS://WWW.Example.com:443/A/B", ok("https://www.example.com/A/B")},
		{"http://example.com:80/", ok("http://example.com/")},
		{"https://example.com:80/", ok("https://example.com:80/")},
		{"http://example.com:443/", ok("http://example.com:443/")},
		{"http://example.com:0080/", ok("http://example.com/")},
		{"http://example.com:08080/", ok("http://example.com:8080/")},
		{"http://example.com:/", ok("http://example.com/")},
		{"http://example.com:65536/", rejected},
		{"http://example.com:8o/", rejected},
		{"http://example.com./a", ok("http://example.com/a")},
		{"http://a_b.example.com/", ok("http://a_b.example.com/")},
		{"http://r3---sn-abc.googlevideo.com/", ok("http://r3---sn-abc.googlevideo.com/")},
		{"http://127.0.0.2:8080", ok("http://127.0.0.2:8080/")},
		// IDN
		{"http://bücher.de/", ok("http://xn--bcher-kva.de/")},
		{"http://BÜCHER.de/", ok("http://xn--bcher-kva.de/")},
		{"http://xn--bcher-kva.de/", ok("http://xn--bcher-kva.de/")},
		{"https://нэб.рф/", ok("https://xn--90ax2c.xn--p1ai/")},
		{"http://ｅｘａｍｐｌｅ．ｃｏｍ/", ok("http://example.com/")}, // fullwidth
		{"http://example%2Ecom/", ok("http://example.com/")},
		{"http://xn--a.com/", rejected}, // invalid punycode
		// IP hosts
		{"http://0x7f.1/", ok("http://127.0.0.1/")},
		{"http://2130706433/", ok("http://127.0.0.1/")},
		{"http://0177.0.0.1/", ok("http://127.0.0.1/")},
		{"http://1.2.3.4./", ok("http://1.2.3.4/")},
		{"http://256.0.0.1/", rejected},
		{"http://1.2.3.09/", rejected},
		{"http://[::1]:8080/", ok("http://[::1]:8080/")},
		{"http://[2001:DB8:0:0:0:0:0:1]/", ok("http://[2001:db8::1]/")},
		{"http://[::ffff:127.0.0.1]/", ok("http://[::ffff:7f00:1]/")},
		{"http://[fe80::1%25eth0]/", rejected},
		{"http://[1.2.3.4]/", rejected},
		{"http://[::1/", rejected},
		// invalid hosts
		{"http:///path", ok("http://path/")}, // as browsers: any number of slashes
		{"http://user@/", rejected},
		{"http://exa mple.com/", rejected},
		{"http://a..b/", rejected},
		{"http://exa<mple.com/", rejected},
		{"http://example%2Xcom/", rejected},
		{"http://abc%FEdef.org/", rejected},
		// path: dot segments, percent-encoding
		{"http://x.com/a/./b/../c", ok("http://x.com/a/c")},
		{"http://x.com/a/b/..", ok("http://x.com/a/")},
		{"http://x.com/../../a", ok("http://x.com/a")},
		{"http://x.com/a/%2e/b/%2E%2e/c", ok("http://x.com/a/c")},
		{"http://x.com/a/.%2e", ok("http://x.com/")},
		{"http://x.com/a..b/...", ok("http://x.com/a..b/...")},
		{"http://x.com//a//b", ok("http://x.com//a//b")},
		{"http://x.com\\a\\b", ok("http://x.com/a/b")},
		{"http://foo.com/%66oo.htm%6c", ok("http://foo.com/foo.html")},
		{"http://foo.com/%7euser/%7Eb", ok("http://foo.com/~user/~b")},
		{"http://foo.com/a%2fb%2Fc", ok("http://foo.com/a%2Fb%2Fc")},
		{"http://foo.com/a%c3%a9", ok("http://foo.com/a%C3%A9")},
		{"http://foo.com/aé", ok("http://foo.com/a%C3%A9")},
		{"http://foo.com/a b", ok("http://foo.com/a%20b")},
		{"http://foo.com/a%zz%4", ok("http://foo.com/a%25zz%254")},
		{"http://foo.com/<{|}>^`\"", ok("http://foo.com/%3C%7B%7C%7D%3E%5E%60%22")},
		{"http://foo.com/[x]", ok("http://foo.com/%5Bx%5D")},
		{"http://foo.com/!$&'()*+,;=:@-._~", ok("http://foo.com/!$&'()*+,;=:@-._~")},
		{"http://foo.com/\x01\x7f", ok("http://foo.com/%01%7F")},
		{"http://foo.com/\xff", ok("http://foo.com/%FF")}, // invalid UTF-8 kept as its bytes
		// whitespace
		{"  http://foo.com/a  ", ok("http://foo.com/a")},
		{"\x00\x1fhttp://foo.com/a\x00", ok("http://foo.com/a")},
		{"http://fo\to.com/a\nb\r", ok("http://foo.com/ab")},
		// query: order kept, strip params, empty params, encoding
		{"http://x.com/?b=2&a=1", ok("http://x.com/?b=2&a=1")},
		{"http://x.com/?a=1&a=2&a=0", ok("http://x.com/?a=1&a=2&a=0")},
		{"http://x.com/?utm_source=x&id=3&UTM_Medium=y&gclid=z&fbclid=w", ok("http://x.com/?id=3")},
		{"http://x.com/?utm_source=x", ok("http://x.com/")},
		{"http://x.com/?utm%5Fsource=x&q=1", ok("http://x.com/?q=1")},
		{"http://x.com/?utmsource=x", ok("http://x.com/?utmsource=x")},
		{"http://x.com/?x_utm_source=1", ok("http://x.com/?x_utm_source=1")},
		{"http://x.com/?", ok("http://x.com/")},
		{"http://x.com?", ok("http://x.com/")},
		{"http://x.com/?&&", ok("http://x.com/")},
		{"http://x.com/?&a=1&&b=2&", ok("http://x.com/?a=1&b=2")},
		{"http://x.com/?a=&b", ok("http://x.com/?a=&b")},
		{"http://x.com/?=1", ok("http://x.com/?=1")},
		{"http://x.com/?q=a+b&r=c%2Bd", ok("http://x.com/?q=a+b&r=c%2Bd")},
		{"http://x.com/?q=a%26b&u=http://y.com/?z", ok("http://x.com/?q=a%26b&u=http://y.com/?z")},
		{"http://x.com/?q=%61%62%e2%82%ac", ok("http://x.com/?q=ab%E2%82%AC")},
		{"http://x.com/?q=€ x", ok("http://x.com/?q=%E2%82%AC%20x")},
		{"http://x.com/?q='\"<>[]{}|\\^`", ok("http://x.com/?q=%27%22%3C%3E%5B%5D%7B%7D%7C%5C%5E%60")},
		{"http://x.com/?q=tl;dr", ok("http://x.com/?q=tl;dr")},
		// session ids
		{"http://x.com/a.jsp;jsessionid=0123ABC", ok("http://x.com/a.jsp")},
		{"http://x.com/a.jsp;JSESSIONID=0123ABC?x=1", ok("http://x.com/a.jsp?x=1")},
		{"http://x.com/a;v=1;jsessionid=0123;w=2/b", ok("http://x.com/a;v=1;w=2/b")},
		{"http://x.com/..;jsessionid=1/a", ok("http://x.com/a")},
		{"http://x.com/a?PHPSESSID=abc&x=1", ok("http://x.com/a?x=1")},
		{"http://x.com/a?x=1;jsessionid=abc&y=2", ok("http://x.com/a?x=1&y=2")},
		{"http://x.com/a?sid=5", ok("http://x.com/a?sid=5")},
		{"http://x.com/a?sid=587fba8f825b05844526519fdb7d75c8&b=1", ok("http://x.com/a?b=1")},
		{"http://x.com/a?b=1&_SID=587FBA8F825B05844526519FDB7D75C8", ok("http://x.com/a?b=1")},
		{"http://x.com/a.php;sid=587fba8f825b05844526519fdb7d75c8?b=1", ok("http://x.com/a.php?b=1")},
		{"http://x.com/a?x=1;sid=587fba8f825b05844526519fdb7d75c8", ok("http://x.com/a?x=1")},
		{"http://x.com/a?sid=05/01/01/123", ok("http://x.com/a?sid=05/01/01/123")},                 // Slashdot story id
		{"http://x.com/a?sid=12345678901234567890", ok("http://x.com/a?sid=12345678901234567890")}, // all digits
		{"http://x.com/a?sid=abcdefghijklmnopqrst", ok("http://x.com/a?sid=abcdefghijklmnopqrst")}, // no digit
		{"http://x.com/a?sid=587fba8f825b0584-526519fdb7d75c8", ok("http://x.com/a?sid=587fba8f825b0584-526519fdb7d75c8")},
		{"http://x.com/a?sid=587fba8f%38%32", ok("http://x.com/a?sid=587fba8f82")}, // decoded, still too short
		{"http://x.com/a?sid", ok("http://x.com/a?sid")},
		{"http://x.com/a?sidebar=587fba8f825b05844526519fdb7d75c8", ok("http://x.com/a?sidebar=587fba8f825b05844526519fdb7d75c8")},
		{"http://x.com/a?osCsid=9f1c&zenid=a1&ASPSESSIONIDQASCTDRB=ABC&k=1", ok("http://x.com/a?k=1")},
		{"http://x.com/a?_jsessionid=1&lsessionid=2&_bv_sessionid=3&_phpsessid=4&k=1", ok("http://x.com/a?k=1")},
		{"http://x.com/a?NewsID=1567539&addressid=250646", ok("http://x.com/a?NewsID=1567539&addressid=250646")},
		// fragment
		{"http://x.com/a#frag", ok("http://x.com/a")},
		{"http://x.com/a?b#c?d", ok("http://x.com/a?b")},
		{"http://x.com/a%23b", ok("http://x.com/a%23b")},
		// userinfo
		{"http://user:pass@x.com/", ok("http://user:pass@x.com/")},
		{"http://user:@x.com/", ok("http://user@x.com/")},
		{"http://:@x.com/", ok("http://x.com/")},
		{"http://@x.com/", ok("http://x.com/")},
		{"http://a@b@x.com/", ok("http://a%40b@x.com/")},
		{"http://us%65r:p%40ss@x.com/", ok("http://user:p%40ss@x.com/")},
		// slashes after the scheme
		{"http:example.com/a", ok("http://example.com/a")},
		{"http:/example.com/a", ok("http://example.com/a")},
		{"http:\\\\example.com/a", ok("http://example.com/a")},
		{"http:////example.com/a", ok("http://example.com/a")},
		// not http(s) or not absolute
		{"", rejected},
		{"example.com/a", rejected},
		{"/a/b", rejected},
		{"//example.com/a", rejected},
		{"ftp://example.com/", rejected},
		{"file:///etc/passwd", rejected},
		{"javascript:alert(1)", rejected},
		{"mailto:a@b.c", rejected},
		{"data:text/html,hi", rejected},
		{"tel:+123", rejected},
		{"ws://example.com/", rejected},
		{"http://x.com/" + strings.Repeat("a", MaxURLLength), rejected},
	}
	for _, tt := range tests {
		got := canonResult(c, tt.in)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Canonicalize(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
		if !got.Err {
			checkCanonical(t, c, got.URL)
		}
	}
}

// checkCanonical checks that s is a fixed point and survives a round trip
// through net/url.
func checkCanonical(t *testing.T, c *Canonicalizer, s string) {
	t.Helper()
	again, err := c.Canonicalize(s)
	if err != nil {
		t.Errorf("Canonicalize(%q) (a canonical URL): %v", s, err)
		return
	}
	if again.String() != s {
		t.Errorf("not idempotent: %q -> %q", s, again.String())
	}
	u, err := url.Parse(s)
	if err != nil {
		t.Errorf("url.Parse(%q): %v", s, err)
		return
	}
	if u.String() != s {
		t.Errorf("url.Parse(%q).String() = %q", s, u.String())
	}
}

func TestCanonicalizeNoStrip(t *testing.T) {
	c, err := NewCanonicalizer(nil)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"http://x.com/a;jsessionid=1?utm_source=a&&b": "http://x.com/a;jsessionid=1?utm_source=a&b",
		"http://x.com/?PHPSESSID=1":                   "http://x.com/?PHPSESSID=1",
	} {
		if got := canonResult(c, in); got.URL != want {
			t.Errorf("Canonicalize(%q) = %+v, want %q", in, got, want)
		}
	}
}

func TestNewCanonicalizer(t *testing.T) {
	for _, bad := range [][]string{{""}, {"ok", "*"}, {"ut*m"}, {"a=b"}, {"a&b"}, {"a b"}, {"a#"}, {"a;b"},
		{"=<token>"}, {"*=<token>"}, {"sid=<TOKEN>"}, {"sid=<token>=<token>"}} {
		_, err := NewCanonicalizer(bad)
		if err == nil {
			t.Errorf("NewCanonicalizer(%q) succeeded", bad)
			continue
		}
		if name := bad[len(bad)-1]; !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Errorf("NewCanonicalizer(%q) error %q does not name the entry", bad, err)
		}
	}
	c, err := NewCanonicalizer([]string{"Foo", "BAR_*", "é"})
	if err != nil {
		t.Fatal(err)
	}
	got := canonResult(c, "http://x.com/?foo=1&FOO=2&bar_x=3&bar=4&%C3%A9=5&%c3%a9=6&é=7&keep=8")
	if want := ok("http://x.com/?bar=4&keep=8"); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// "=<token>" entries, also as prefixes; an unqualified entry for the
	// same name wins, in either order.
	const tok = "587fba8f825b05844526519fdb7d75c8"
	for _, list := range [][]string{{"s=<token>", "s"}, {"s", "s=<token>"}} {
		c, err := NewCanonicalizer(append(list, "p_*=<token>"))
		if err != nil {
			t.Fatal(err)
		}
		got := canonResult(c, "http://x.com/?s=1&p_a="+tok+"&p_b=2&k=3")
		if want := ok("http://x.com/?p_b=2&k=3"); got != want {
			t.Errorf("%q: got %+v, want %+v", list, got, want)
		}
	}
	d1, d2 := DefaultStripParams(), DefaultStripParams()
	d1[0] = "changed"
	if d2[0] != "utm_*" {
		t.Errorf("DefaultStripParams shares its slice")
	}
}

func TestResolve(t *testing.T) {
	c := newTestCanon(t)
	base, err := url.Parse("http://a.com/b/c/d;p?q=1#f")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref  string
		want result
	}{
		// RFC 3986 section 5.4.1 (with our canonical form)
		{"g", ok("http://a.com/b/c/g")},
		{"./g", ok("http://a.com/b/c/g")},
		{"g/", ok("http://a.com/b/c/g/")},
		{"/g", ok("http://a.com/g")},
		{"//g", ok("http://g/")},
		{"?y", ok("http://a.com/b/c/d;p?y")},
		{"g?y", ok("http://a.com/b/c/g?y")},
		{"g#s", ok("http://a.com/b/c/g")},
		{"g?y#s", ok("http://a.com/b/c/g?y")},
		{";x", ok("http://a.com/b/c/;x")},
		{"g;x", ok("http://a.com/b/c/g;x")},
		{".", ok("http://a.com/b/c/")},
		{"./", ok("http://a.com/b/c/")},
		{"..", ok("http://a.com/b/")},
		{"../", ok("http://a.com/b/")},
		{"../g", ok("http://a.com/b/g")},
		{"../..", ok("http://a.com/")},
		{"../../g", ok("http://a.com/g")},
		{"../../../g", ok("http://a.com/g")},
		{"/./g", ok("http://a.com/g")},
		{"/../g", ok("http://a.com/g")},
		{"g.", ok("http://a.com/b/c/g.")},
		{"..g", ok("http://a.com/b/c/..g")},
		{"./../g", ok("http://a.com/b/g")},
		{"g/../h", ok("http://a.com/b/c/h")},
		// browsers
		{"  g  ", ok("http://a.com/b/c/g")},
		{"\\g\\h", ok("http://a.com/g/h")},
		{"\\\\other.com\\x", ok("http://other.com/x")},
		{"http:g", ok("http://a.com/b/c/g")}, // same scheme: relative
		{"https:g", ok("https://g/")},
		{"HTTPS://B.com", ok("https://b.com/")},
		{"?utm_source=x", ok("http://a.com/b/c/d;p")},
		// rejected
		{"", rejected},
		{"   ", rejected},
		{"#top", rejected},
		{"javascript:void(0)", rejected},
		{" JavaScript:void(0)", rejected},
		{"java\tscript:alert(1)", rejected},
		{"mailto:x@a.com", rejected},
		{"data:image/png;base64,AAAA", rejected},
		{"tel:+1234", rejected},
		{"ftp://a.com/", rejected},
		{"//", rejected},
		{"http://", rejected},
	}
	for _, tt := range tests {
		var got result
		if u, err := c.Resolve(base, tt.ref); err != nil {
			got = rejected
		} else {
			got = ok(u.String())
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Resolve(%s, %q) mismatch (-want +got):\n%s", base, tt.ref, diff)
		}
	}
	// A nil or non-http base only resolves absolute references.
	if _, err := c.Resolve(nil, "g"); err == nil {
		t.Errorf("Resolve(nil, relative) succeeded")
	}
	if u, err := c.Resolve(nil, "http://x.com"); err != nil || u.String() != "http://x.com/" {
		t.Errorf("Resolve(nil, absolute) = %v, %v", u, err)
	}
	ftp, _ := url.Parse("ftp://a.com/b/")
	if _, err := c.Resolve(ftp, "g"); err == nil {
		t.Errorf("Resolve(ftp base, relative) succeeded")
	}
	if _, err := c.Resolve(base, "javascript:x"); err == nil || !strings.Contains(err.Error(), `"javascript"`) {
		t.Errorf("error for javascript: = %v, want it to name the scheme", err)
	}
}

func TestFingerprint(t *testing.T) {
	// Stored in Redis: these values must never change.
	for s, want := range map[string]uint64{
		"":                    0xe3b0c44298fc1c14,
		"http://example.com/": 0x2a1b402420ef4657, // sha256sum: 2a1b402420ef4657...
	} {
		if got := Fingerprint(s); got != want {
			t.Errorf("Fingerprint(%q) = %#x, want %#x", s, got, want)
		}
	}
}

func TestHostKey(t *testing.T) {
	for in, want := range map[string]string{
		"http://Example.COM/a":         "example.com",
		"http://example.com:80/":       "example.com",
		"https://example.com:443/":     "example.com",
		"http://example.com:443/":      "example.com:443",
		"https://example.com:80/":      "example.com:80",
		"http://127.0.0.2:8080/x":      "127.0.0.2:8080",
		"http://example.com./":         "example.com",
		"http://[2001:db8::1]/":        "[2001:db8::1]",
		"http://[2001:DB8::1]:8080/":   "[2001:db8::1]:8080",
		"http://user:pw@example.com/":  "example.com",
		"HTTPS://example.com:443/":     "example.com",
		"https://example.com:8443/abc": "example.com:8443",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := HostKey(u); got != want {
			t.Errorf("HostKey(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorsWrap(t *testing.T) {
	c := newTestCanon(t)
	_, err := c.Canonicalize("http://[::1")
	if err == nil || !strings.HasPrefix(err.Error(), "urlx: ") {
		t.Errorf("error %v", err)
	}
	_, err = c.Canonicalize("http://xn--a.com/")
	if err == nil || errors.Unwrap(err) == nil {
		t.Errorf("idna error not wrapped: %v", err)
	}
}

// TestSortQuery: Options.SortQuery orders parameters by name, stably, after
// stripping; without it the order is kept.
func TestSortQuery(t *testing.T) {
	sorted, err := NewCanonicalizerWith(Options{StripParams: DefaultStripParams(), SortQuery: true})
	if err != nil {
		t.Fatal(err)
	}
	kept := newTestCanon(t)
	tests := []struct{ in, sorted, kept string }{
		{"http://x.com/p?b=2&a=1", "http://x.com/p?a=1&b=2", "http://x.com/p?b=2&a=1"},
		{"http://x.com/p?a=1&b=2", "http://x.com/p?a=1&b=2", "http://x.com/p?a=1&b=2"},
		{"http://x.com/p?t=y&s=1&t=x", "http://x.com/p?s=1&t=y&t=x", "http://x.com/p?t=y&s=1&t=x"},
		{"http://x.com/p?b&a=&&c=3#f", "http://x.com/p?a=&b&c=3", "http://x.com/p?b&a=&c=3"},
		{"http://x.com/p?z=1&utm_source=x&a=2", "http://x.com/p?a=2&z=1", "http://x.com/p?z=1&a=2"},
		{"http://x.com/p?b=1;jsessionid=0123456789abcdef0123&a=2", "http://x.com/p?a=2&b=1", "http://x.com/p?b=1&a=2"},
		{"http://x.com/p?%62=1&a=2", "http://x.com/p?a=2&b=1", "http://x.com/p?b=1&a=2"},
		{"http://x.com/p?B=1&a=2", "http://x.com/p?B=1&a=2", "http://x.com/p?B=1&a=2"},
		{"http://x.com/p?only=1", "http://x.com/p?only=1", "http://x.com/p?only=1"},
		{"http://x.com/p", "http://x.com/p", "http://x.com/p"},
	}
	for _, tc := range tests {
		got := []string{canonResult(sorted, tc.in).URL, canonResult(kept, tc.in).URL}
		if d := cmp.Diff([]string{tc.sorted, tc.kept}, got); d != "" {
			t.Errorf("%q: [sorted, kept] (-want +got):\n%s", tc.in, d)
		}
		checkCanonical(t, sorted, got[0])
	}
	doc, err := url.Parse("http://example.com/")
	if err != nil {
		t.Fatal(err)
	}
	// the links of a page: the two orders are one link, as Scrapy's
	// canonicalization makes them
	html := `<a href="/page.html?b=2&amp;a=1">1</a><a href="/page.html?a=1&amp;b=2">2</a>`
	if got := toResult(sorted.ExtractLinks(doc, []byte(html), 0)).URLs; !cmp.Equal(got, []string{"http://example.com/page.html?a=1&b=2"}) {
		t.Errorf("sorted links %q", got)
	}
	if got := toResult(kept.ExtractLinks(doc, []byte(html), 0)).URLs; len(got) != 2 {
		t.Errorf("links with order kept %q, want both", got)
	}
}
