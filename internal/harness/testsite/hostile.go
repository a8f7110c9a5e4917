package testsite

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// hostilePrefix is the path of the hostile hub; every hostile page is
// below it, on host 0.
const hostilePrefix = "/hostile/"

// Facts of the hostile pages.
const (
	// BombSize is the decompressed size of /hostile/bomb: 1 GiB of zero
	// bytes.
	BombSize = 1 << 30
	// HugeSize is the size of /hostile/huge: 64 MiB of HTML.
	HugeSize = 64 << 20
	// SlowInterval is the time between two bytes of /hostile/slow.
	SlowInterval = 200 * time.Millisecond
	// HostileMaxDuration is how long /hostile/slow and /hostile/stall last
	// at most, if neither the client nor Close ends them first.
	HostileMaxDuration = 10 * time.Minute
	// DupPages is the number of /hostile/dup/<n> pages with identical
	// content.
	DupPages = 5
)

// HostileURLs describes the hostile pages of a site started with
// Options.Hostile: their absolute URLs, all on host 0, and what a correct
// crawler makes of them. Every request to them is recorded in Hits.
type HostileURLs struct {
	// Hub is ".../hostile/", linked from host 0's root. It links to
	// every entry page below: Encodings' URLs, Bomb, Huge, Slow, Stall,
	// LoopA, LoopSelf, Calendar, CalendarDay, Deep, SessionID, Dups, PDF
	// and PNG.
	Hub string
	// Encodings are the pages in legacy charsets: gbk (DeclaredHeader),
	// gb18030 (DeclaredMetaCharset), big5 (DeclaredMetaHTTPEquiv),
	// shift_jis (DeclaredNone) and euc-kr (DeclaredHeader), in that
	// order. A crawler decodes each to UTF-8 (Title, Text) and requests
	// its Target.
	Encodings []EncodedPage
	// Bomb is ".../hostile/bomb", a gzip bomb: "Content-Encoding: gzip"
	// whatever the request's Accept-Encoding, text/html, about 1 MiB that
	// decompresses to BombSize zero bytes. A crawler stops decompressing
	// at its body cap and records the page as too large.
	Bomb string
	// BombSize is the bomb's decompressed size.
	BombSize int64
	// Huge is ".../hostile/huge", HugeSize bytes of text/html sent chunked
	// (no Content-Length). A crawler stops reading at its body cap.
	Huge string
	// HugeSize is the size of Huge's body.
	HugeSize int64
	// Slow is ".../hostile/slow": headers at once (200, text/html), then
	// one byte every SlowInterval, for at most MaxDuration, when the
	// connection is dropped. A crawler gives up at its fetch deadline.
	Slow string
	// SlowInterval is the time between two bytes of Slow.
	SlowInterval time.Duration
	// Stall is ".../hostile/stall": it accepts the request and never
	// answers (its hit has Status 0), dropping the connection after
	// MaxDuration. A crawler times out waiting for the headers.
	Stall string
	// MaxDuration is how long Slow and Stall last at most.
	MaxDuration time.Duration
	// LoopA is ".../hostile/loop/a", which answers 302 to LoopB, which
	// answers 302 to LoopA. A crawler requests each once (it has seen
	// the other) or stops at its redirect hop limit.
	LoopA, LoopB string
	// LoopSelf is ".../hostile/loop/self", which answers 302 to itself. A
	// crawler requests it once.
	LoopSelf string
	// Calendar is ".../hostile/calendar/2026/11", a calendar trap: every
	// month page ".../hostile/calendar/YYYY/MM" (years 0001 to 9999)
	// links to the month before and after it. A crawler stops at its
	// depth or per-host page limit.
	Calendar string
	// CalendarDay is ".../hostile/cal?day=2026-11-22", the same trap with
	// a query: every day links to the day before and after it.
	CalendarDay string
	// Deep is ".../hostile/deep/", a repeated-segment trap: every page
	// ".../hostile/deep/" + "a/"×k links to the relative "a/". A crawler
	// stops at its depth, path length or repeated-segment limit.
	Deep string
	// SessionID is ".../hostile/sid", a session-id trap: every response
	// links to SessionPage with a fresh random id, once as
	// "?PHPSESSID=<id>" and once as ";jsessionid=<id>". A crawler that
	// strips session ids requests SessionPage once.
	SessionID string
	// SessionPage is ".../hostile/sid/page", the session pages without
	// their ids; every variant serves the same bytes.
	SessionPage string
	// Dups are ".../hostile/dup/1" to ".../hostile/dup/<DupPages>", which
	// serve byte-identical HTML linking to DupTarget. A crawler fetches
	// each (they are different URLs) and may recognise the duplicate
	// content.
	Dups []string
	// DupTarget is ".../hostile/dup/target", an ordinary small page.
	DupTarget string
	// PDF is ".../hostile/binary.pdf", a small application/pdf file, and
	// PNG is ".../hostile/image.png", a valid 1x1 image/png. A crawler
	// stores them and does not parse them as HTML.
	PDF, PNG string
	// NotALink is ".../hostile/not-a-link", written as an HTML link inside
	// PDF and PNG (a PDF comment, a PNG text chunk): only a crawler that
	// parses them as HTML requests it, and gets a 404.
	NotALink string
}

// Hostile returns the URLs and facts of the hostile pages, or the zero
// HostileURLs if the site was started without Options.Hostile.
func (s *Site) Hostile() HostileURLs {
	if s.hostile == nil {
		return HostileURLs{}
	}
	root := s.hosts[0].root + hostilePrefix
	u := HostileURLs{
		Hub:          root,
		Bomb:         root + "bomb",
		BombSize:     BombSize,
		Huge:         root + "huge",
		HugeSize:     HugeSize,
		Slow:         root + "slow",
		SlowInterval: SlowInterval,
		Stall:        root + "stall",
		MaxDuration:  HostileMaxDuration,
		LoopA:        root + "loop/a",
		LoopB:        root + "loop/b",
		LoopSelf:     root + "loop/self",
		Calendar:     root + calendarPath(2026, 11)[len(hostilePrefix):],
		CalendarDay:  root + calDayPath(2026, 11, 22)[len(hostilePrefix):],
		Deep:         root + "deep/",
		SessionID:    root + "sid",
		SessionPage:  root + "sid/page",
		DupTarget:    root + "dup/target",
		PDF:          root + "binary.pdf",
		PNG:          root + "image.png",
		NotALink:     root + "not-a-link",
	}
	for _, e := range s.hostile.enc {
		u.Encodings = append(u.Encodings, EncodedPage{
			URL:      root + "enc/" + e.name,
			Charset:  e.charset,
			Declared: e.declared,
			Title:    e.title,
			Text:     e.text,
			Target:   s.hosts[0].root + (&url.URL{Path: e.targetPath()}).EscapedPath(),
		})
	}
	for i := 1; i <= DupPages; i++ {
		u.Dups = append(u.Dups, root+"dup/"+strconv.Itoa(i))
	}
	return u
}

// hostilePage is which hostile page a request names.
type hostilePage uint8

const (
	hNotFound hostilePage = iota
	hHub
	hEnc       // i: index into hostileData.enc
	hEncTarget // i: index into hostileData.enc
	hBomb
	hHuge
	hSlow
	hStall
	hLoopA
	hLoopB
	hLoopSelf
	hCalendar // y, m
	hCalDay   // y, m, d
	hDeep     // i: depth
	hSID
	hSIDPage
	hDup // i: 1..DupPages
	hDupTarget
	hPDF
	hPNG
)

// hostileRoute is a parsed request for a hostile page.
type hostileRoute struct {
	page    hostilePage
	status  int
	i       int
	y, m, d int
}

// hostileRoute parses a request for hostilePrefix + rest with query.
func (s *Site) hostileRoute(rest, query string) hostileRoute {
	ok := func(p hostilePage) hostileRoute { return hostileRoute{page: p, status: http.StatusOK} }
	switch rest {
	case "":
		return ok(hHub)
	case "bomb":
		return ok(hBomb)
	case "huge":
		return ok(hHuge)
	case "slow":
		return ok(hSlow)
	case "stall":
		return hostileRoute{page: hStall} // never answered
	case "loop/a":
		return hostileRoute{page: hLoopA, status: http.StatusFound}
	case "loop/b":
		return hostileRoute{page: hLoopB, status: http.StatusFound}
	case "loop/self":
		return hostileRoute{page: hLoopSelf, status: http.StatusFound}
	case "sid":
		return ok(hSID)
	case "sid/page":
		return ok(hSIDPage)
	case "dup/target":
		return ok(hDupTarget)
	case "binary.pdf":
		return ok(hPDF)
	case "image.png":
		return ok(hPNG)
	case "cal":
		if v, found := strings.CutPrefix(query, "day="); found {
			if y, m, d, valid := parseDay(v); valid {
				r := ok(hCalDay)
				r.y, r.m, r.d = y, m, d
				return r
			}
		}
	}
	switch {
	case strings.HasPrefix(rest, "enc/"):
		name, target, hasTarget := strings.Cut(rest[len("enc/"):], "/")
		for i := range s.hostile.enc {
			e := &s.hostile.enc[i]
			if name != e.name {
				continue
			}
			switch {
			case !hasTarget:
				r := ok(hEnc)
				r.i = i
				return r
			case target == e.target:
				r := ok(hEncTarget)
				r.i = i
				return r
			}
		}
	case strings.HasPrefix(rest, "calendar/"):
		if y, m, valid := parseMonth(rest[len("calendar/"):]); valid {
			r := ok(hCalendar)
			r.y, r.m = y, m
			return r
		}
	case strings.HasPrefix(rest, "deep/"):
		segs := rest[len("deep/"):]
		if len(segs)%2 == 0 && strings.Count(segs, "a/") == len(segs)/2 {
			r := ok(hDeep)
			r.i = len(segs) / 2
			return r
		}
	case strings.HasPrefix(rest, "sid/page;jsessionid=") && len(rest) > len("sid/page;jsessionid="):
		return ok(hSIDPage)
	case strings.HasPrefix(rest, "dup/"):
		if n, valid := parseIndex(rest[len("dup/"):]); valid && n >= 1 && n <= DupPages {
			r := ok(hDup)
			r.i = n
			return r
		}
	}
	return hostileRoute{page: hNotFound, status: http.StatusNotFound}
}

// digits parses s, made of exactly n decimal digits.
func digits(s string, n int) (int, bool) {
	if len(s) != n {
		return 0, false
	}
	v := 0
	for i := 0; i < n; i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + int(s[i]-'0')
	}
	return v, true
}

// parseMonth parses "YYYY/MM", years 1..9999.
func parseMonth(s string) (y, m int, ok bool) {
	ys, ms, found := strings.Cut(s, "/")
	y, ok1 := digits(ys, 4)
	m, ok2 := digits(ms, 2)
	if !found || !ok1 || !ok2 || y < 1 || m < 1 || m > 12 {
		return 0, 0, false
	}
	return y, m, true
}

// parseDay parses "YYYY-MM-DD", a valid date of years 1..9999.
func parseDay(s string) (y, m, d int, ok bool) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return 0, 0, 0, false
	}
	y, ok1 := digits(s[:4], 4)
	m, ok2 := digits(s[5:7], 2)
	d, ok3 := digits(s[8:], 2)
	if !ok1 || !ok2 || !ok3 || y < 1 {
		return 0, 0, 0, false
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	if t.Year() != y || int(t.Month()) != m || t.Day() != d {
		return 0, 0, 0, false
	}
	return y, m, d, true
}

// calendarPath is the path of a month of the calendar trap.
func calendarPath(y, m int) string {
	return fmt.Sprintf("%scalendar/%04d/%02d", hostilePrefix, y, m)
}

// calDayPath is the path (and query) of a day of the calendar trap.
func calDayPath(y, m, d int) string {
	return fmt.Sprintf("%scal?day=%04d-%02d-%02d", hostilePrefix, y, m, d)
}

// anchor is a link of a hostile page.
type anchor struct{ href, text string }

// renderLinks writes a small HTML page with a list of links to b.
func renderLinks(b *bytes.Buffer, title string, links ...anchor) {
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>")
	b.WriteString(title)
	b.WriteString("</title>\n</head>\n<body>\n<h1>")
	b.WriteString(title)
	b.WriteString("</h1>\n<ul>\n")
	for _, l := range links {
		b.WriteString("<li><a href=\"" + l.href + "\">" + l.text + "</a></li>\n")
	}
	b.WriteString("</ul>\n</body>\n</html>\n")
}

// hubLinks are the links of the hub, absolute paths.
func (s *Site) hubLinks() []anchor {
	var out []anchor
	for _, e := range s.hostile.enc {
		out = append(out, anchor{hostilePrefix + "enc/" + e.name, e.charset + " (declared: " + string(e.declared) + ")"})
	}
	for _, p := range []string{"bomb", "huge", "slow", "stall", "loop/a", "loop/self"} {
		out = append(out, anchor{hostilePrefix + p, p})
	}
	out = append(out,
		anchor{calendarPath(2026, 11), "calendar"},
		anchor{calDayPath(2026, 11, 22), "day"},
		anchor{hostilePrefix + "deep/", "deep"},
		anchor{hostilePrefix + "sid", "session"})
	for i := 1; i <= DupPages; i++ {
		out = append(out, anchor{hostilePrefix + "dup/" + strconv.Itoa(i), "duplicate " + strconv.Itoa(i)})
	}
	out = append(out,
		anchor{hostilePrefix + "binary.pdf", "a PDF file"},
		anchor{hostilePrefix + "image.png", "a PNG image"})
	return out
}

// sessionID returns a fresh random session id of n hexadecimal digits.
func sessionID(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// serveHostile answers a request for a hostile page; the hit is recorded.
func (s *Site) serveHostile(w http.ResponseWriter, r *http.Request, hr hostileRoute) {
	const html, text = "text/html; charset=utf-8", "text/plain; charset=utf-8"
	var b bytes.Buffer
	ctype := html
	d := s.hostile
	switch hr.page {
	case hNotFound:
		ctype = text
		b.WriteString("404 page not found\n")
	case hHub:
		renderLinks(&b, "Hostile pages", s.hubLinks()...)
	case hEnc:
		e := &d.enc[hr.i]
		s.write(w, r, hr.status, e.contentType(), e.body)
		return
	case hEncTarget:
		renderLeaf(&b, "Target of the "+d.enc[hr.i].charset+" page", "The link was decoded correctly.")
	case hBomb:
		s.serveBomb(w, r)
		return
	case hHuge:
		s.serveHuge(w, r)
		return
	case hSlow:
		s.serveSlow(w, r)
		return
	case hStall:
		t := time.NewTimer(HostileMaxDuration)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-s.done:
		}
		panic(http.ErrAbortHandler) // drop the connection, answer nothing
	case hLoopA, hLoopB, hLoopSelf:
		loc := hostilePrefix + "loop/self"
		switch hr.page {
		case hLoopA:
			loc = hostilePrefix + "loop/b"
		case hLoopB:
			loc = hostilePrefix + "loop/a"
		}
		w.Header().Set("Location", loc)
		ctype = text
		b.WriteString("moved to " + loc + "\n")
	case hCalendar:
		var links []anchor
		if hr.y > 1 || hr.m > 1 {
			y, m := hr.y, hr.m-1
			if m == 0 {
				y, m = y-1, 12
			}
			links = append(links, anchor{calendarPath(y, m), "previous month"})
		}
		if hr.y < 9999 || hr.m < 12 {
			y, m := hr.y, hr.m+1
			if m == 13 {
				y, m = y+1, 1
			}
			links = append(links, anchor{calendarPath(y, m), "next month"})
		}
		renderLinks(&b, fmt.Sprintf("Calendar %s %04d", time.Month(hr.m), hr.y), links...)
	case hCalDay:
		t := time.Date(hr.y, time.Month(hr.m), hr.d, 0, 0, 0, 0, time.UTC)
		var links []anchor
		for _, step := range []int{-1, 1} {
			n := t.AddDate(0, 0, step)
			if y := n.Year(); y >= 1 && y <= 9999 {
				links = append(links, anchor{calDayPath(y, int(n.Month()), n.Day()), n.Format("Monday 2 January 2006")})
			}
		}
		renderLinks(&b, "Day "+t.Format("2006-01-02"), links...)
	case hDeep:
		renderLinks(&b, "Deep "+strconv.Itoa(hr.i), anchor{"a/", "deeper"})
	case hSID:
		renderLinks(&b, "Session",
			anchor{hostilePrefix + "sid/page?PHPSESSID=" + sessionID(26), "with PHPSESSID"},
			anchor{hostilePrefix + "sid/page;jsessionid=" + strings.ToUpper(sessionID(32)), "with jsessionid"})
	case hSIDPage:
		renderLinks(&b, "Session page", anchor{hostilePrefix + "sid", "back"})
	case hDup:
		// The same bytes whatever the number.
		renderLinks(&b, "Duplicate content", anchor{hostilePrefix + "dup/target", "target"})
	case hDupTarget:
		renderLeaf(&b, "Duplicate target", "Linked from every duplicate page.")
	case hPDF:
		s.write(w, r, hr.status, "application/pdf", d.pdf)
		return
	case hPNG:
		s.write(w, r, hr.status, "image/png", d.png)
		return
	}
	s.write(w, r, hr.status, ctype, b.Bytes())
}

// aborted reports whether the site is closing or the client went away.
func (s *Site) aborted(r *http.Request) bool {
	select {
	case <-s.done:
		return true
	case <-r.Context().Done():
		return true
	default:
		return false
	}
}
