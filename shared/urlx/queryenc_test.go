package urlx

import (
	"html"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLinkQueryEncoding: a link's query is encoded in the document's
// encoding, its path in UTF-8, as the WHATWG URL parser does with a
// document's encoding.
func TestLinkQueryEncoding(t *testing.T) {
	c := newTestCanon(t)
	doc, err := url.Parse("http://example.org/dir/page.html")
	if err != nil {
		t.Fatal(err)
	}
	const p = "http://example.org/"
	tests := []struct {
		name     string
		encoding string
		html     string
		want     []string
	}{
		{"iso-8859-15 euro; path stays UTF-8", "iso-8859-15", `<a href="/&hearts;/you?c=&euro;">x</a>`,
			[]string{p + "%E2%99%A5/you?c=%A4"}},
		{"label instead of name", "iso8859-15", `<a href="/?c=€">x</a>`, []string{p + "?c=%A4"}},
		{"windows-1252", "windows-1252", `<a href="/café?q=café&amp;r=é">x</a>`, []string{p + "caf%C3%A9?q=caf%E9&r=%E9"}},
		{"character the encoding lacks: its reference, percent-encoded", "windows-1252", `<a href="/?q=♥x">x</a>`,
			[]string{p + "?q=%26%239829%3Bx"}},
		{"shift_jis", "shift_jis", `<a href="/日本?q=日本">x</a>`, []string{p + "%E6%97%A5%E6%9C%AC?q=%93%FA%96%7B"}},
		{"shift_jis second bytes in the ASCII range", "shift_jis", `<a href="/?q=ソア">x</a>`, []string{p + "?q=%83%5C%83A"}},
		{"gbk", "gbk", `<a href="/?q=中文">x</a>`, []string{p + "?q=%D6%D0%CE%C4"}},
		{"gbk euro is one byte (WHATWG)", "gbk", `<a href="/?q=€">x</a>`, []string{p + "?q=%80"}},
		{"gb18030 four-byte sequence", "gb18030", `<a href="/?q=😀">x</a>`, []string{p + "?q=%949%FC6"}},
		{"big5", "big5", `<a href="/?q=中文">x</a>`, []string{p + "?q=%A4%A4%A4%E5"}},
		{"euc-kr", "euc-kr", `<a href="/?q=한국">x</a>`, []string{p + "?q=%C7%D1%B1%B9"}},
		{"euc-jp", "euc-jp", `<a href="/?q=日本">x</a>`, []string{p + "?q=%C6%FC%CB%DC"}},
		{"utf-8", "utf-8", `<a href="/?q=é">x</a>`, []string{p + "?q=%C3%A9"}},
		{"no encoding is utf-8", "", `<a href="/?q=é">x</a>`, []string{p + "?q=%C3%A9"}},
		{"utf-16le documents query in utf-8", "utf-16le", `<a href="/?q=é">x</a>`, []string{p + "?q=%C3%A9"}},
		{"unknown encoding name: utf-8", "x-no-such", `<a href="/?q=é">x</a>`, []string{p + "?q=%C3%A9"}},
		{"escapes already there are kept", "windows-1252", `<a href="/?q=%C3%A9&amp;r=%e9">x</a>`, []string{p + "?q=%C3%A9&r=%E9"}},
		{"relative query", "windows-1252", `<a href="?q=é">x</a>`, []string{p + "dir/page.html?q=%E9"}},
		{"scheme-relative", "windows-1252", `<a href="//other.example/?q=é">x</a>`, []string{"http://other.example/?q=%E9"}},
		{"fragment not encoded, dropped", "windows-1252", `<a href="/a?q=é#é">x</a>`, []string{p + "a?q=%E9"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			links := c.ExtractLinksWith(doc, []byte(tc.html), LinkOptions{Encoding: tc.encoding})
			var got []string
			for _, u := range links.URLs {
				got = append(got, u.String())
				checkCanonical(t, c, u.String())
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("links (-want +got):\n%s", d)
			}
		})
	}
}

// TestLinkQueryEncodingCanonicalAndBase: the canonical link and the base
// href are URLs of the document too.
func TestLinkQueryEncodingCanonicalAndBase(t *testing.T) {
	c := newTestCanon(t)
	doc, err := url.Parse("http://example.org/")
	if err != nil {
		t.Fatal(err)
	}
	html := `<head><base href="/b/?s=é"><link rel="canonical" href="/c?q=é"></head><a href="x?q=é">x</a>`
	links := c.ExtractLinksWith(doc, []byte(html), LinkOptions{Encoding: "windows-1252"})
	got := linksResult{BaseHref: links.BaseHref}
	for _, u := range links.URLs {
		got.URLs = append(got.URLs, u.String())
	}
	want := linksResult{URLs: []string{"http://example.org/b/x?q=%E9"}, BaseHref: "http://example.org/b/?s=%E9"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if want := "http://example.org/c?q=%E9"; links.Canonical != want {
		t.Errorf("canonical %q, want %q", links.Canonical, want)
	}
}

// fuzzEncodings are the document encodings FuzzQueryEncoder tries.
var fuzzEncodings = []string{"windows-1252", "iso-8859-15", "shift_jis", "euc-jp", "iso-2022-jp", "gbk", "gb18030",
	"big5", "euc-kr", "koi8-r", "x-user-defined", "utf-8", "utf-16le"}

// FuzzQueryEncoder: encoding a query never adds, removes or moves a
// parameter delimiter, leaves an ASCII query as it is, and the links it
// gives are canonical.
func FuzzQueryEncoder(f *testing.F) {
	for i, s := range []string{"c=€", "q=日本&r=ソア", "a=♥;b=%E9", "x=\xff\xfe=y", "ü&=&ü", "q=😀", "plain=1&b"} {
		f.Add(s, i)
	}
	c := newTestCanon(f)
	doc, err := url.Parse("http://example.org/p")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, q string, which int) {
		name := fuzzEncodings[uint(which)%uint(len(fuzzEncodings))]
		out := newQueryEncoder(name).encode(q)
		for _, d := range "&=;+#" {
			if strings.Count(out, string(d)) != strings.Count(q, string(d)) {
				t.Fatalf("%s: %q -> %q changes the count of %q", name, q, out, d)
			}
		}
		if isASCIIString(q) && out != q {
			t.Fatalf("%s: ASCII %q -> %q", name, q, out)
		}
		if u, err := c.Resolve(doc, "?"+out); err == nil {
			checkFuzzCanonical(t, c, q, u)
		}
		links := c.ExtractLinksWith(doc, []byte(`<a href="?`+html.EscapeString(q)+`">`), LinkOptions{Encoding: name})
		for _, u := range links.URLs {
			checkFuzzCanonical(t, c, q, u)
		}
	})
}

func isASCIIString(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
