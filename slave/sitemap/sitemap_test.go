package sitemap

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func date(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

var urlsetWant = &Result{Format: URLSet, Invalid: 3, Entries: []Entry{
	{Loc: "https://example.com/", LastMod: date("2024-03-01T00:00:00Z"), ChangeFreq: "daily", Priority: 1, HasPriority: true},
	{Loc: "https://example.com/a?x=1&y=2", LastMod: date("2024-03-01T09:20:30Z"), ChangeFreq: "weekly", Priority: 0.3, HasPriority: true},
	{Loc: "https://example.com/b"},
	{Loc: "https://example.com/c", LastMod: date("2023-12-31T23:59:00Z")},
}}

// feedWant is what testdata/feed.rss lists.
var feedWant = &Result{Format: RSS, Invalid: 1, Entries: []Entry{
	{Loc: "https://example.com/one", LastMod: date("2024-03-04T09:00:00Z")},
	{Loc: "https://example.com/two", LastMod: date("2024-03-04T09:30:00Z")},
	{Loc: "https://example.com/three?a=1&b=2", LastMod: date("2024-03-02T08:00:00Z")},
	{Loc: "https://example.com/four", LastMod: date("2024-03-02T12:00:00Z")},
	{Loc: "https://example.com/five"},
}}

func TestParseFixtures(t *testing.T) {
	urlset := fixture(t, "urlset.xml")
	tests := []struct {
		name    string
		in      []byte
		want    *Result
		wantErr error // errors.Is; nil = no error
		anyErr  bool  // some error is expected (a syntax error)
	}{
		{name: "urlset", in: urlset, want: urlsetWant},
		{name: "urlset gzip", in: gz(t, urlset), want: urlsetWant},
		{name: "index", in: fixture(t, "index.xml"), want: &Result{Format: Index, Entries: []Entry{
			{Loc: "https://example.com/sitemap-pages.xml", LastMod: date("2024-02-10T08:00:00Z")},
			{Loc: "https://example.com/sitemap-news.xml.gz"},
		}}},
		{name: "text", in: fixture(t, "text.txt"), want: &Result{Format: Text, Invalid: 1, Entries: []Entry{
			{Loc: "https://example.com/one"}, {Loc: "https://example.com/two"},
			{Loc: "https://example.com/three"}, {Loc: "https://example.com/four"},
		}}},
		{name: "text gzip", in: gz(t, []byte("https://example.com/z\n")), want: &Result{Format: Text,
			Entries: []Entry{{Loc: "https://example.com/z"}}}},
		{name: "declared latin-1", in: fixture(t, "latin1.xml"), want: &Result{Format: URLSet,
			Entries: []Entry{{Loc: "https://example.com/caf%C3%A9"}}}},
		{name: "rss without items", in: fixture(t, "rss.xml"), want: &Result{Format: RSS}},
		{name: "rss 2.0", in: fixture(t, "feed.rss"), want: feedWant},
		{name: "rss 2.0 gzip", in: gz(t, fixture(t, "feed.rss")), want: feedWant},
		{name: "rss 1.0", in: fixture(t, "rss1.rdf"), want: &Result{Format: RSS, Entries: []Entry{
			{Loc: "https://example.com/one", LastMod: date("2024-03-04T00:00:00Z")},
			{Loc: "https://example.com/two"},
		}}},
		{name: "atom", in: fixture(t, "feed.atom"), want: &Result{Format: Atom, Invalid: 1, Entries: []Entry{
			{Loc: "https://example.com/one", LastMod: date("2024-03-04T09:00:00Z")},
			{Loc: "https://example.com/two", LastMod: date("2024-03-01T12:00:00Z")},
		}}},
		{name: "damaged index: bare URLs, several locs, cut short", in: fixture(t, "index-damaged.xml"), anyErr: true,
			want: &Result{Format: Index, Invalid: 1, Repairs: Repairs{BareLocs: 2, ExtraLocs: 2, Truncated: 1}, Entries: []Entry{
				{Loc: "https://example.com/bare.xml?a=1&b=2"},
				{Loc: "https://example.com/one.xml", LastMod: date("2024-01-01T00:00:00Z")},
				{Loc: "https://example.com/two.xml"},
				{Loc: "https://example.com/three.xml", LastMod: date("2024-03-03T00:00:00Z")},
				{Loc: "https://example.com/fine.xml"},
				{Loc: "https://example.com/cut.xml"},
			}}},
		{name: "urlset entry with two locs", in: []byte("<urlset><url><loc>http://a.example/1</loc><priority>0.2</priority>" +
			"<loc>http://a.example/2</loc><changefreq>daily</changefreq></url></urlset>"),
			want: &Result{Format: URLSet, Repairs: Repairs{ExtraLocs: 1}, Entries: []Entry{
				{Loc: "http://a.example/1", Priority: 0.2, HasPriority: true}, {Loc: "http://a.example/2", ChangeFreq: "daily"}}}},
		{name: "an entry cut inside its loc is dropped", in: []byte("<urlset><url><loc>http://a.example/1</loc></url><url><loc>http://a.example/2"),
			anyErr: true, want: &Result{Format: URLSet, Entries: []Entry{{Loc: "http://a.example/1"}}}},
		{name: "an entry cut inside its second loc keeps the first", in: []byte("<sitemapindex><sitemap><loc>http://a.example/1</loc><loc>http://a.exa"),
			anyErr: true, want: &Result{Format: Index, Repairs: Repairs{Truncated: 1}, Entries: []Entry{{Loc: "http://a.example/1"}}}},
		{name: "bogus text is not a sitemap", in: []byte("this is a bogus sitemap\nreally\n"), wantErr: ErrNotSitemap, want: &Result{}},
		{name: "another root element", in: []byte("<html><body>x</body></html>"), wantErr: ErrNotSitemap, want: &Result{}},
		{name: "billion laughs stops at the unknown entity", in: fixture(t, "billion-laughs.xml"), anyErr: true,
			want: &Result{Format: URLSet, Entries: []Entry{{Loc: "https://example.com/before"}}}},
		{name: "syntax error keeps what came before", in: fixture(t, "broken.xml"), anyErr: true,
			want: &Result{Format: URLSet, Entries: []Entry{{Loc: "https://example.com/ok"}}}},
		{name: "empty", in: nil, anyErr: true, want: &Result{}},
		{name: "long loc is invalid", in: []byte("<urlset><url><loc>https://example.com/" + strings.Repeat("a", 3000) +
			"</loc></url></urlset>"), want: &Result{Format: URLSet, Invalid: 1}},
		{name: "too deep", in: []byte("<urlset>" + strings.Repeat("<a>", 40) + strings.Repeat("</a>", 40) + "</urlset>"),
			anyErr: true, want: &Result{Format: URLSet}},
		{name: "long text run", in: []byte("<urlset>" + strings.Repeat(" ", maxRun+10) + "</urlset>"),
			wantErr: ErrTooLarge, want: &Result{Format: URLSet}},
		{name: "long comment", in: []byte("<urlset><!--" + strings.Repeat("x", maxRun+10) + "--></urlset>"),
			wantErr: ErrTooLarge, want: &Result{Format: URLSet}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(bytes.NewReader(tc.in), Limits{})
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			case tc.wantErr == nil && tc.anyErr && err == nil:
				t.Errorf("no error, want one")
			case tc.wantErr == nil && !tc.anyErr && err != nil:
				t.Errorf("err = %v", err)
			}
			got.Bytes = 0
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("result (-want +got):\n%s", d)
			}
		})
	}
}

// urlsReader streams a urlset of n URLs without holding it.
func urlsReader(n int) io.Reader {
	var rs []io.Reader
	rs = append(rs, strings.NewReader(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`))
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		var b strings.Builder
		for j := i; j < min(i+chunk, n); j++ {
			fmt.Fprintf(&b, "<url><loc>https://example.com/p/%d</loc></url>\n", j)
		}
		rs = append(rs, strings.NewReader(b.String()))
	}
	rs = append(rs, strings.NewReader("</urlset>"))
	return io.MultiReader(rs...)
}

func TestLimits(t *testing.T) {
	t.Run("exactly 50000 URLs", func(t *testing.T) {
		res, err := Parse(urlsReader(MaxURLs), Limits{})
		if err != nil || len(res.Entries) != MaxURLs {
			t.Fatalf("got %d entries, err %v; want %d, nil", len(res.Entries), err, MaxURLs)
		}
	})
	t.Run("a million URLs stop at 50000", func(t *testing.T) {
		res, err := Parse(urlsReader(1_000_000), Limits{})
		if !errors.Is(err, ErrTooManyURLs) {
			t.Fatalf("err = %v, want ErrTooManyURLs", err)
		}
		if len(res.Entries) != MaxURLs || res.Entries[MaxURLs-1].Loc != fmt.Sprintf("https://example.com/p/%d", MaxURLs-1) {
			t.Fatalf("kept %d entries", len(res.Entries))
		}
		// it stopped reading right after the limit, not at the end
		if res.Bytes > MaxBytes/4 {
			t.Errorf("read %d bytes", res.Bytes)
		}
	})
	t.Run("text over the URL limit", func(t *testing.T) {
		var b strings.Builder
		for i := range 11 {
			fmt.Fprintf(&b, "https://example.com/%d\n", i)
		}
		res, err := Parse(strings.NewReader(b.String()), Limits{MaxURLs: 10})
		if !errors.Is(err, ErrTooManyURLs) || len(res.Entries) != 10 {
			t.Fatalf("got %d entries, err %v", len(res.Entries), err)
		}
	})
	t.Run("gzip bomb stops at 50 MB", func(t *testing.T) {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write([]byte("<urlset><url><loc>https://example.com/first</loc></url>"))
		line := []byte("<url><loc>https://example.com/same</loc></url>\n")
		block := bytes.Repeat(line, 1<<16/len(line))
		for w := 0; w < MaxBytes+(1<<20); w += len(block) {
			zw.Write(block)
		}
		zw.Write([]byte("</urlset>"))
		zw.Close()
		if buf.Len() > 1<<20 {
			t.Fatalf("bomb is %d bytes compressed", buf.Len())
		}
		res, err := Parse(&buf, Limits{MaxURLs: 1 << 30})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
		if res.Bytes != MaxBytes || res.Entries[0].Loc != "https://example.com/first" {
			t.Errorf("read %d bytes, first %q", res.Bytes, res.Entries[0].Loc)
		}
	})
	t.Run("feed over the URL limit", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("<rss><channel>")
		for i := range 11 {
			fmt.Fprintf(&b, "<item><link>https://example.com/%d</link></item>", i)
		}
		b.WriteString("</channel></rss>")
		res, err := Parse(strings.NewReader(b.String()), Limits{MaxURLs: 10})
		if !errors.Is(err, ErrTooManyURLs) || len(res.Entries) != 10 || res.Format != RSS {
			t.Fatalf("got %v %d entries, err %v", res.Format, len(res.Entries), err)
		}
	})
	t.Run("cut by MaxBytes inside an entry whose loc is complete", func(t *testing.T) {
		in := "<urlset><url><loc>https://example.com/a</loc></url><url><loc>https://example.com/b</loc><lastmod>2024-01-01</lastmod></url></urlset>"
		res, err := Parse(strings.NewReader(in), Limits{MaxBytes: int64(strings.Index(in, "<lastmod>") + 5)})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
		want := &Result{Format: URLSet, Repairs: Repairs{Truncated: 1}, Entries: []Entry{{Loc: "https://example.com/a"}, {Loc: "https://example.com/b"}}}
		res.Bytes = 0
		if d := cmp.Diff(want, res); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
	t.Run("exactly MaxBytes is allowed", func(t *testing.T) {
		in := []byte("https://example.com/a\n")
		res, err := Parse(bytes.NewReader(in), Limits{MaxBytes: int64(len(in))})
		if err != nil || len(res.Entries) != 1 {
			t.Fatalf("got %v, %v", res, err)
		}
		_, err = Parse(bytes.NewReader(append(in, '\n')), Limits{MaxBytes: int64(len(in))})
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("one byte over: err = %v", err)
		}
	})
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want Format
		xml  Format
	}{
		{"urlset", fixture(t, "urlset.xml"), URLSet, URLSet},
		{"urlset gzip", gz(t, fixture(t, "urlset.xml")), URLSet, URLSet},
		{"index", fixture(t, "index.xml"), Index, Index},
		{"text", fixture(t, "text.txt"), Text, Unknown},
		{"rss", fixture(t, "feed.rss"), RSS, RSS},
		{"rss 1.0", fixture(t, "rss1.rdf"), RSS, RSS},
		{"atom", fixture(t, "feed.atom"), Atom, Atom},
		{"bogus text", []byte("not a sitemap"), Text, Unknown},
		{"html", []byte("<!doctype html><html><body>x</body></html>"), Unknown, Unknown},
		{"empty", nil, Unknown, Unknown},
		{"bad gzip", []byte{0x1f, 0x8b, 0, 0}, Unknown, Unknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Detect(bytes.NewReader(tc.in)); got != tc.want {
				t.Errorf("Detect = %v, want %v", got, tc.want)
			}
			if got := DetectXML(bytes.NewReader(tc.in)); got != tc.xml {
				t.Errorf("DetectXML = %v, want %v", got, tc.xml)
			}
		})
	}
}

func TestParsePubDate(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
	}{
		{"Sun, 06 Sep 2009 16:20:00 +0000", date("2009-09-06T16:20:00Z")},
		{"Thu, 05 Jan 2017 13:34:51 +0100", date("2017-01-05T12:34:51Z")},
		{"Thu, 05 Jan 17 13:34:52 -0230", date("2017-01-05T16:04:52Z")},
		{"5 Jan 2017 13:34 GMT", date("2017-01-05T13:34:00Z")},
		{"Mon, 5 jan 99 13:34:00 pdt", date("1999-01-05T20:34:00Z")},
		{"Fri, 05 Jan 2017 13:34:51 UT", date("2017-01-05T13:34:51Z")}, // a wrong weekday is not checked
		{"2017-01-05T13:34:51+01:00", date("2017-01-05T12:34:51Z")},    // W3C, as some feeds write
		{"05 Jan 17 13:34:55", time.Time{}},                            // no zone
		{"05 Jan 2017 13:34:55 XYZ", time.Time{}},
		{"05 Jan 2017 13:34:55 +01", time.Time{}},
		{"32 Jan 2017 13:34:55 +0100", time.Time{}},
		{"05 Foo 2017 13:34:55 +0100", time.Time{}},
		{"05 Jan 201 13:34:55 +0100", time.Time{}},
		{"05 Jan 2017 25:34:55 +0100", time.Time{}},
		{"", time.Time{}},
	}
	for _, tc := range tests {
		if got := parsePubDate(tc.in); !got.Equal(tc.want) {
			t.Errorf("parsePubDate(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestRepairsString(t *testing.T) {
	tests := []struct {
		r    Repairs
		want string
	}{
		{Repairs{}, ""},
		{Repairs{BareLocs: 1}, "1 entry without <loc> (the text read as the URL)"},
		{Repairs{BareLocs: 15, ExtraLocs: 2, Truncated: 1}, "15 entries without <loc> (the text read as the URL), " +
			"2 extra <loc> in one entry (each read as an entry of its own), the last entry cut short (kept: its URL was complete)"},
	}
	for _, tc := range tests {
		if got := tc.r.String(); got != tc.want || tc.r.IsZero() != (tc.want == "") {
			t.Errorf("%+v: %q (zero %v), want %q", tc.r, got, tc.r.IsZero(), tc.want)
		}
	}
}

func TestParseLastMod(t *testing.T) {
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2024", date("2024-01-01T00:00:00Z")},
		{"2024-05", date("2024-05-01T00:00:00Z")},
		{"2024-05-06", date("2024-05-06T00:00:00Z")},
		{"2024-05-06T07:08+02:00", date("2024-05-06T05:08:00Z")},
		{"2024-05-06T07:08:09Z", date("2024-05-06T07:08:09Z")},
		{"2024-05-06T07:08:09.5Z", date("2024-05-06T07:08:09.5Z")},
		{"yesterday", time.Time{}},
		{"", time.Time{}},
	}
	for _, tc := range tests {
		if got := ParseLastMod(tc.in); !got.Equal(tc.want) {
			t.Errorf("ParseLastMod(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzParse: any input parses within the limits, every entry kept is an
// absolute http(s) URL, and the format agrees with Detect.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"urlset.xml", "index.xml", "text.txt", "rss.xml", "billion-laughs.xml", "latin1.xml", "broken.xml",
		"feed.rss", "feed.atom", "rss1.rdf", "index-damaged.xml"} {
		f.Add(fixture(f, name))
	}
	f.Add(gz(f, fixture(f, "urlset.xml")))
	f.Add([]byte("<urlset><url><loc>http://a/</loc><priority>0.5</priority></url></urlset>"))
	f.Fuzz(func(t *testing.T, in []byte) {
		res, err := Parse(bytes.NewReader(in), Limits{MaxURLs: 100, MaxBytes: 1 << 16})
		if res == nil {
			t.Fatalf("nil result (err %v)", err)
		}
		if len(res.Entries) > 100 || res.Bytes > 1<<16 {
			t.Fatalf("over the limits: %d entries, %d bytes", len(res.Entries), res.Bytes)
		}
		for _, e := range res.Entries {
			if !validLoc(e.Loc) {
				t.Fatalf("invalid loc kept: %q", e.Loc)
			}
			if e.HasPriority && (e.Priority < 0 || e.Priority > 1) {
				t.Fatalf("priority %v", e.Priority)
			}
		}
		if err == nil && res.Format == Unknown {
			t.Fatalf("no error and no format")
		}
	})
}
