package testsite

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Page revisions and validators, for incremental recrawls.
//
// Every ordinary page starts at revision 0, whose body is the one the site
// always served. Revise moves pages to a later revision: the page then
// carries a <p class="rev">revision N</p> after its heading, so its body
// (and checksum) changes while its links stay.
//
// With Options.Validators an ordinary page answers with an ETag
// ("h<host>-p<n>-r<rev>") and a Last-Modified (revisionEpoch plus rev
// hours), and a GET whose If-None-Match lists its ETag, or (without
// If-None-Match) whose If-Modified-Since is not before its Last-Modified,
// gets 304 Not Modified with no body (RFC 9110 13.1.1, 13.1.3, 15.4.5).
// Without it the site sends no validators and ignores conditional
// requests: every page is a 200 with its body, the kind of server a
// crawler must recognise by checksum.

// revisionEpoch is the Last-Modified of revision 0.
var revisionEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Revise moves the ordinary pages with these absolute URLs (PageURL's
// form) to their next revision and returns how many it moved; a URL that
// is no ordinary page of the site is skipped.
func (s *Site) Revise(urls ...string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revs == nil {
		s.revs = map[[2]int]int{}
	}
	n := 0
	for _, raw := range urls {
		host, page, ok := s.pageOf(raw)
		if !ok {
			continue
		}
		s.revs[[2]int{host, page}]++
		n++
	}
	return n
}

// Revision returns the revision of the ordinary page at an absolute URL
// (0 for one never revised or no page of the site).
func (s *Site) Revision(raw string) int {
	host, page, ok := s.pageOf(raw)
	if !ok {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revs[[2]int{host, page}]
}

// pageOf finds the host and page index of an ordinary page URL.
func (s *Site) pageOf(raw string) (int, int, bool) {
	for i, h := range s.hosts {
		rest, ok := strings.CutPrefix(raw, h.root)
		if !ok {
			continue
		}
		if rest == "/" {
			return i, 0, true
		}
		if p, ok := strings.CutPrefix(rest, "/page/"); ok {
			if n, ok := parseIndex(p); ok && n >= 1 && n < s.opts.PagesPerHost {
				return i, n, true
			}
		}
		return 0, 0, false
	}
	return 0, 0, false
}

// pageRevision returns an ordinary page's revision and the status its
// request gets: 304 when the site sends validators and the request's
// match them, else status. Called with s.mu held.
func (s *Site) pageRevision(host, n int, r *http.Request, status int) (int, int) {
	rev := s.revs[[2]int{host, n}]
	if !s.opts.Validators || status != http.StatusOK {
		return rev, status
	}
	etag, mod := pageETag(host, n, rev), revisionEpoch.Add(time.Duration(rev)*time.Hour)
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		for _, t := range strings.Split(inm, ",") {
			if t = strings.TrimSpace(t); t == etag || t == "W/"+etag || t == "*" {
				return rev, http.StatusNotModified
			}
		}
		return rev, status
	}
	if ims := r.Header.Get("If-Modified-Since"); ims != "" {
		if t, err := http.ParseTime(ims); err == nil && !t.Before(mod) {
			return rev, http.StatusNotModified
		}
	}
	return rev, status
}

// setValidators sets an ordinary page's ETag and Last-Modified when the
// site sends validators.
func (s *Site) setValidators(h http.Header, host, n, rev int) {
	if !s.opts.Validators {
		return
	}
	h.Set("ETag", pageETag(host, n, rev))
	h.Set("Last-Modified", revisionEpoch.Add(time.Duration(rev)*time.Hour).Format(http.TimeFormat))
}

func pageETag(host, n, rev int) string {
	return `"h` + strconv.Itoa(host) + "-p" + strconv.Itoa(n) + "-r" + strconv.Itoa(rev) + `"`
}
