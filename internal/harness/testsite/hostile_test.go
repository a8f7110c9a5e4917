package testsite

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/htmlindex"
)

// links returns the resolved links of an HTML page fetched from u.
func links(t testing.TB, u string, body []byte) []string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range hrefs(t, pu, body) {
		out = append(out, l.String())
	}
	return out
}

// hostileSite starts a small site with the hostile pages.
func hostileSite(t testing.TB, opts Options) (*Site, HostileURLs) {
	t.Helper()
	opts.Hostile = true
	s := start(t, opts)
	return s, s.Hostile()
}

func TestHostileOff(t *testing.T) {
	opts := Options{Hosts: 3, PagesPerHost: 30, Robots: true, Specials: true, Seed: 4}
	off := start(t, opts)
	if diff := cmp.Diff(HostileURLs{}, off.Hostile()); diff != "" {
		t.Errorf("Hostile() without Options.Hostile (-want +got):\n%s", diff)
	}
	c := newClient(t)
	if r := fetch(t, c, off.Seeds()[0]+"hostile/"); r.status != 404 {
		t.Errorf("hub without Options.Hostile: %d, want 404", r.status)
	}
	if bytes.Contains(fetch(t, c, off.Seeds()[0]).body, []byte("hostile")) {
		t.Error("root links to the hostile pages without Options.Hostile")
	}

	opts.Hostile = true
	on, h := hostileSite(t, opts)
	if diff := cmp.Diff(hostNumbers(off, off.Expected()), hostNumbers(on, on.Expected())); diff != "" {
		t.Errorf("Expected changes with Options.Hostile (-off +on):\n%s", diff)
	}
	for u := range on.Expected() {
		if strings.Contains(u, "/hostile/") {
			t.Errorf("Expected has %s", u)
		}
	}
	root := fetch(t, c, on.Seeds()[0])
	if !slices.Contains(links(t, on.Seeds()[0], root.body), h.Hub) {
		t.Errorf("host 0's root doesn't link to %s", h.Hub)
	}
	if r := fetch(t, c, on.HostURLs()[1]+"hostile/"); r.status != 404 {
		t.Errorf("hub on host 1: %d, want 404", r.status)
	}
}

// hostNumbers replaces the roots of s's hosts in m's keys by "HOST<i>/".
func hostNumbers(s *Site, m map[string]int) map[string]int {
	var repl []string
	for i, root := range s.HostURLs() {
		repl = append(repl, root, fmt.Sprintf("HOST%d/", i))
	}
	r := strings.NewReplacer(repl...)
	out := map[string]int{}
	for u, n := range m {
		out[r.Replace(u)] = n
	}
	return out
}

func TestHostileHub(t *testing.T) {
	_, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5})
	c := newClient(t)
	r := fetch(t, c, h.Hub)
	if r.status != 200 {
		t.Fatalf("hub: %d", r.status)
	}
	want := []string{}
	for _, e := range h.Encodings {
		want = append(want, e.URL)
	}
	want = append(want, h.Bomb, h.Huge, h.Slow, h.Stall, h.LoopA, h.LoopSelf, h.Calendar, h.CalendarDay, h.Deep, h.SessionID)
	want = append(want, h.Dups...)
	want = append(want, h.PDF, h.PNG)
	if diff := cmp.Diff(want, links(t, h.Hub, r.body)); diff != "" {
		t.Errorf("hub links (-want +got):\n%s", diff)
	}
	if got := []any{h.BombSize, h.HugeSize, h.SlowInterval, h.MaxDuration, len(h.Dups)}; !cmp.Equal(got,
		[]any{int64(1 << 30), int64(64 << 20), 200 * time.Millisecond, 10 * time.Minute, 5}) {
		t.Errorf("facts: %v", got)
	}
}

func TestHostileEncodings(t *testing.T) {
	s, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5})
	c := newClient(t)
	wantDecl := map[string]Declaration{
		"gbk": DeclaredHeader, "gb18030": DeclaredMetaCharset, "big5": DeclaredMetaHTTPEquiv,
		"shift_jis": DeclaredNone, "euc-kr": DeclaredHeader,
	}
	if len(h.Encodings) != len(wantDecl) {
		t.Errorf("%d encodings, want %d", len(h.Encodings), len(wantDecl))
	}
	for _, e := range h.Encodings {
		t.Run(e.Charset, func(t *testing.T) {
			if wantDecl[e.Charset] != e.Declared {
				t.Errorf("declared in %q, want %q", e.Declared, wantDecl[e.Charset])
			}
			r := fetch(t, c, e.URL)
			ctype := r.header.Get("Content-Type")
			if r.status != 200 || (e.Declared == DeclaredHeader) != strings.Contains(ctype, "charset="+e.Charset) {
				t.Fatalf("%d %q", r.status, ctype)
			}
			if utf8.Valid(r.body) {
				t.Error("body is valid UTF-8")
			}
			// Declarations are found as an HTML5 parser finds them.
			_, name, _ := charset.DetermineEncoding(r.body, ctype)
			if e.Declared == DeclaredNone {
				if name == e.Charset {
					t.Errorf("undeclared page detected as %s without sniffing", name)
				}
			} else if name != e.Charset {
				t.Errorf("declared encoding found: %q, want %q", name, e.Charset)
			}

			enc, err := htmlindex.Get(e.Charset)
			if err != nil {
				t.Fatal(err)
			}
			decoded, err := enc.NewDecoder().Bytes(r.body)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"<title>" + e.Title + "</title>", "<p>" + e.Text + "</p>"} {
				if !bytes.Contains(decoded, []byte(want)) {
					t.Errorf("decoded page lacks %q", want)
				}
			}
			if got := links(t, e.URL, decoded); !cmp.Equal(got, []string{e.Target}) {
				t.Errorf("decoded links %q, want [%s]", got, e.Target)
			}
			if r := fetch(t, c, e.Target); r.status != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
				t.Errorf("target %s: %d %q", e.Target, r.status, r.header.Get("Content-Type"))
			}

			// A crawler that doesn't decode requests another URL: a 404.
			for _, wrong := range [][]byte{r.body, mustDecode(t, r.body)} {
				for _, l := range links(t, e.URL, wrong) {
					if l == e.Target {
						t.Errorf("link %s found without decoding", l)
					}
					if r := fetch(t, c, l); r.status != 404 {
						t.Errorf("wrongly decoded link %s: %d, want 404", l, r.status)
					}
				}
			}
		})
	}
	if r := fetch(t, c, s.Seeds()[0]+"hostile/enc/gbk/x"); r.status != 404 {
		t.Errorf("other path under enc/: %d, want 404", r.status)
	}
}

// mustDecode decodes b as windows-1252, a browser's default.
func mustDecode(t testing.TB, b []byte) []byte {
	t.Helper()
	out, err := charmap.Windows1252.NewDecoder().Bytes(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rawClient returns a client that neither asks for nor decodes gzip.
func rawClient(t testing.TB) *http.Client {
	c := newClient(t)
	c.Transport.(*http.Transport).DisableCompression = true
	return c
}

func TestHostileBomb(t *testing.T) {
	_, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5})
	c := rawClient(t)
	for _, ae := range []string{"", "identity", "gzip"} {
		req, _ := http.NewRequest(http.MethodGet, h.Bomb, nil)
		if ae != "" {
			req.Header.Set("Accept-Encoding", ae)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		zipped, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("Accept-Encoding %q: %d %v", ae, resp.StatusCode, resp.Header)
		}
		if n := len(zipped); n > 2<<20 || int64(n) != resp.ContentLength {
			t.Errorf("compressed bomb is %d bytes, Content-Length %d", n, resp.ContentLength)
		}
		if size := binary.LittleEndian.Uint32(zipped[len(zipped)-4:]); size != uint32(h.BombSize) {
			t.Errorf("gzip ISIZE %d, want %d", size, h.BombSize)
		}
		zr, err := gzip.NewReader(bytes.NewReader(zipped))
		if err != nil {
			t.Fatal(err)
		}
		first := make([]byte, 1<<20)
		if _, err := io.ReadFull(zr, first); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, make([]byte, 1<<20)) {
			t.Error("the first MiB is not zeros")
		}
	}
}

func TestGzipBombDecompresses(t *testing.T) {
	const chunk, repeats = 1 << 16, 9
	z, err := gzipBomb(chunk, repeats)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	all, err := io.ReadAll(io.LimitReader(zr, 2*chunk*repeats)) // checks CRC and size at the end
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all, make([]byte, chunk*repeats)) {
		t.Errorf("decompressed %d bytes, want %d zeros", len(all), chunk*repeats)
	}
	if len(z) > chunk*repeats/100 {
		t.Errorf("compressed to %d bytes", len(z))
	}
}

func TestHostileHuge(t *testing.T) {
	_, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5, Gzip: true})
	c := newClient(t)
	resp, err := c.Get(h.Huge)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 15)
	if _, err := io.ReadFull(resp.Body, head); err != nil || string(head) != "<!DOCTYPE html>" {
		t.Fatalf("head %q: %v", head, err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, h.HugeSize))
	if err != nil || n+int64(len(head)) != h.HugeSize || resp.ContentLength != -1 || resp.Uncompressed {
		t.Errorf("read %d bytes (%v), length %d, uncompressed %v; want %d", n+int64(len(head)), err,
			resp.ContentLength, resp.Uncompressed, h.HugeSize)
	}
}

func TestHostileSlowAndStall(t *testing.T) {
	s, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5})
	c := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.Slow, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 3)
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != "<!D" || resp.StatusCode != 200 {
		t.Errorf("slow: %d %q %v", resp.StatusCode, got, err)
	}
	cancel()
	resp.Body.Close()

	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, h.Stall, nil)
	if resp, err := c.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("stall answered %d", resp.StatusCode)
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stall: %v, want a timeout", err)
	}
	// Hits are recorded on arrival.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if len(s.Hits()) == 2 || time.Now().After(deadline) {
			break
		}
	}
	want := []Hit{{Path: "/hostile/slow", Status: 200}, {Path: "/hostile/stall", Status: 0}}
	if diff := cmp.Diff(want, s.Hits(), cmp.FilterPath(func(p cmp.Path) bool {
		switch p.Last().String() {
		case ".Host", ".At", ".UserAgent", ".Header":
			return true
		}
		return false
	}, cmp.Ignore())); diff != "" {
		t.Errorf("hits (-want +got):\n%s", diff)
	}
}

func TestHostileRedirectLoops(t *testing.T) {
	_, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5})
	c := newClient(t)
	for from, to := range map[string]string{h.LoopA: h.LoopB, h.LoopB: h.LoopA, h.LoopSelf: h.LoopSelf} {
		r := fetch(t, c, from)
		pu, _ := url.Parse(from)
		loc, err := pu.Parse(r.header.Get("Location"))
		if r.status != 302 || err != nil || loc.String() != to {
			t.Errorf("%s: %d to %v (%v), want 302 to %s", from, r.status, loc, err, to)
		}
	}
	// A client following redirects gives up.
	follow := &http.Client{Transport: c.Transport, Timeout: 10 * time.Second}
	if resp, err := follow.Get(h.LoopA); err == nil {
		resp.Body.Close()
		t.Error("redirect loop ended")
	}
}

// walk follows, from u, the link whose text is rel, n times, checking that
// every page answers 200 and is new, and returns the URLs seen.
func walk(t testing.TB, c *http.Client, u, rel string, n int) []string {
	t.Helper()
	seen := []string{u}
	for range n {
		r := fetch(t, c, u)
		if r.status != 200 {
			t.Fatalf("%s: %d", u, r.status)
		}
		m := regexpHref(rel).FindSubmatch(r.body)
		if m == nil {
			t.Fatalf("%s: no %q link in %s", u, rel, r.body)
		}
		next := links(t, u, []byte(`<a href="`+string(m[1])+`">`))[0]
		if slices.Contains(seen, next) {
			t.Fatalf("%s: %q link to %s, seen before", u, rel, next)
		}
		seen = append(seen, next)
		u = next
	}
	return seen
}

func TestHostileTraps(t *testing.T) {
	_, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5})
	root := strings.TrimSuffix(h.Hub, "/hostile/")
	c := newClient(t)
	for _, tc := range []struct {
		name, from, rel string
		n               int
		last            string
	}{
		{"next month", h.Calendar, "next month", 15, "/hostile/calendar/2028/02"},
		{"previous month", h.Calendar, "previous month", 11, "/hostile/calendar/2025/12"},
		{"deep", h.Deep, "deeper", 12, "/hostile/deep/a/a/a/a/a/a/a/a/a/a/a/a/"},
		{"last month", root + "/hostile/calendar/9999/11", "next month", 1, "/hostile/calendar/9999/12"},
		{"first month", root + "/hostile/calendar/0001/02", "previous month", 1, "/hostile/calendar/0001/01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := walk(t, c, tc.from, tc.rel, tc.n)
			if tc.last != "" && seen[len(seen)-1] != root+tc.last {
				t.Errorf("ended at %s, want %s", seen[len(seen)-1], root+tc.last)
			}
		})
	}

	// Days, across month and year ends.
	u := h.CalendarDay
	for i := range 45 {
		r := fetch(t, c, u)
		l := links(t, u, r.body)
		if r.status != 200 || len(l) != 2 {
			t.Fatalf("%s: %d, links %q", u, r.status, l)
		}
		if i == 44 && l[1] != root+"/hostile/cal?day=2027-01-06" {
			t.Errorf("day 45 links to %s", l[1])
		}
		u = l[1]
	}
	for _, edge := range []struct {
		path  string
		links int
	}{
		{"/hostile/calendar/9999/12", 1}, {"/hostile/calendar/0001/01", 1},
		{"/hostile/cal?day=9999-12-31", 1}, {"/hostile/cal?day=0001-01-01", 1},
	} {
		if r := fetch(t, c, root+edge.path); r.status != 200 || len(links(t, root+edge.path, r.body)) != edge.links {
			t.Errorf("%s: %d, %d links, want 200 and %d", edge.path, r.status, len(links(t, root+edge.path, r.body)), edge.links)
		}
	}
	for _, p := range []string{
		"/hostile/calendar/2026/13", "/hostile/calendar/2026/1", "/hostile/calendar/0000/01",
		"/hostile/calendar/2026/11/", "/hostile/cal?day=2026-02-30", "/hostile/cal", "/hostile/cal?day=2026-11-22&x=1",
		"/hostile/deep/b/", "/hostile/deep/a", "/hostile/deep/a/b/", "/hostile/loop/c", "/hostile/dup/0",
		"/hostile/dup/6", "/hostile/sid/page;jsessionid=", "/hostile/nope", "/hostile/not-a-link",
	} {
		if r := fetch(t, c, root+p); r.status != 404 {
			t.Errorf("%s: %d, want 404", p, r.status)
		}
	}
}

// regexpHref matches the href of the link whose text is text.
func regexpHref(text string) *regexp.Regexp {
	return regexp.MustCompile(`<a href="([^"]+)">` + regexp.QuoteMeta(text) + `</a>`)
}

func TestHostileSessionIDs(t *testing.T) {
	_, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5})
	c := newClient(t)
	var all []string
	for range 2 {
		r := fetch(t, c, h.SessionID)
		l := links(t, h.SessionID, r.body)
		if r.status != 200 || len(l) != 2 ||
			!strings.HasPrefix(l[0], h.SessionPage+"?PHPSESSID=") || !strings.HasPrefix(l[1], h.SessionPage+";jsessionid=") {
			t.Fatalf("%d, links %q", r.status, l)
		}
		all = append(all, l...)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(all)))) != 4 {
		t.Errorf("session ids repeat: %q", all)
	}
	want := fetch(t, c, h.SessionPage)
	for _, u := range all {
		if r := fetch(t, c, u); r.status != 200 || !bytes.Equal(r.body, want.body) {
			t.Errorf("%s: %d, same content %v", u, r.status, bytes.Equal(r.body, want.body))
		}
	}
}

func TestHostileDuplicates(t *testing.T) {
	s, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5})
	c := newClient(t)
	if len(h.Dups) != DupPages {
		t.Fatalf("%d dups", len(h.Dups))
	}
	first := fetch(t, c, h.Dups[0])
	for _, u := range h.Dups {
		r := fetch(t, c, u)
		if r.status != 200 || !bytes.Equal(r.body, first.body) {
			t.Errorf("%s: %d, identical %v", u, r.status, bytes.Equal(r.body, first.body))
		}
		if l := links(t, u, r.body); !cmp.Equal(l, []string{h.DupTarget}) {
			t.Errorf("%s links to %q", u, l)
		}
	}
	if r := fetch(t, c, h.DupTarget); r.status != 200 {
		t.Errorf("dup target: %d", r.status)
	}
	counts := s.HitCounts()
	for _, u := range append(h.Dups, h.DupTarget) {
		if counts[u] != 1 && u != h.Dups[0] {
			t.Errorf("%s hit %d times", u, counts[u])
		}
	}
}

func TestHostileBinaries(t *testing.T) {
	_, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5, Gzip: true})
	c := newClient(t)
	pdf := fetch(t, c, h.PDF)
	if pdf.status != 200 || pdf.header.Get("Content-Type") != "application/pdf" ||
		!bytes.HasPrefix(pdf.body, []byte("%PDF-1.")) || !bytes.HasSuffix(pdf.body, []byte("%%EOF\n")) {
		t.Errorf("pdf: %d %q %q", pdf.status, pdf.header.Get("Content-Type"), pdf.body)
	}
	img := fetch(t, c, h.PNG)
	if img.status != 200 || img.header.Get("Content-Type") != "image/png" {
		t.Errorf("png: %d %q", img.status, img.header.Get("Content-Type"))
	}
	m, err := png.Decode(bytes.NewReader(img.body))
	if err != nil || m.Bounds().Dx() != 1 || m.Bounds().Dy() != 1 {
		t.Errorf("png: %v, %v", err, m)
	}
	for _, b := range []response{pdf, img} {
		if l := links(t, h.PDF, b.body); !cmp.Equal(l, []string{h.NotALink}) {
			t.Errorf("parsed as HTML, links %q, want [%s]", l, h.NotALink)
		}
	}
}

func TestHostileMethods(t *testing.T) {
	s, h := hostileSite(t, Options{Hosts: 1, PagesPerHost: 5})
	c := newClient(t)
	for _, u := range []string{h.Bomb, h.Huge, h.Slow, h.Hub, h.Encodings[0].URL} {
		resp, err := c.Head(u)
		if err != nil {
			t.Fatalf("HEAD %s: %v", u, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("HEAD %s: %d", u, resp.StatusCode)
		}
	}
	resp, err := c.Post(h.Bomb, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST bomb: %d", resp.StatusCode)
	}
	if n := len(s.Hits()); n != 6 {
		t.Errorf("%d hits, want 6", n)
	}
}

// TestHostileCloseNoLeaks closes the site while hostile handlers run.
func TestHostileCloseNoLeaks(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, err := Start(Options{Hosts: 1, PagesPerHost: 5, Hostile: true})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Hostile()
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	errs := make(chan error, 3)
	closed := make(chan struct{})
	for _, u := range []string{h.Slow, h.Stall, h.Huge} {
		go func() {
			resp, err := c.Get(u)
			if err == nil {
				// A byte, then nothing until the site is closed.
				if _, err = io.ReadFull(resp.Body, make([]byte, 1)); err == nil {
					<-closed
					_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, HugeSize))
				}
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); len(s.Hits()) < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("requests never arrived")
		}
	}
	s.Close()
	close(closed)
	for range 3 {
		if err := <-errs; err == nil {
			t.Error("a hostile request ended cleanly after Close")
		}
	}
}
