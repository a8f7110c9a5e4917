package slaved

import (
	"net/http"
	"net/url"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/warc"
)

// Incremental recrawls, on the slave. A lease of a page fetched before
// carries its validators (frontier.Task.Revisit): the fetch sends
// If-None-Match and If-Modified-Since with them, and a page found as it was
// — a 304 Not Modified, or a 200 whose content checksum is the stored one
// (a server that ignores conditional requests) — is recorded as unchanged:
// one page event (revisit "unchanged", status 304 or 200, the validators
// it confirmed) and a WARC revisit record, and nothing else. Its body is
// not parsed, its links are not extracted again (they are in the frontier
// already, and the recrawl re-enqueues every recorded page itself) and its
// items are not extracted again (their rows stay as they are). Any other
// answer is a changed page, processed like a new one.

// conditionalHeaders are the request headers of a revisit: nil for a
// task without validators.
func conditionalHeaders(v *frontier.Validators) http.Header {
	if v == nil || (v.ETag == "" && v.LastModified == "") {
		return nil
	}
	h := http.Header{}
	if v.ETag != "" {
		h.Set("If-None-Match", v.ETag)
	}
	if v.LastModified != "" {
		h.Set("If-Modified-Since", v.LastModified)
	}
	return h
}

// revisit handles the response to a lease with validators: it records an
// unchanged page and reports true, or marks page changed and reports false
// (the caller goes on as for a new page). page has its checksum set.
func (s *Slave) revisit(c *frontier.Completion, u *url.URL, res *Response, page *events.Page) bool {
	v := c.Lease.Revisit
	if v == nil {
		return false
	}
	st := res.Status
	notModified := st == http.StatusNotModified
	sameBody := st >= 200 && st < 300 && !res.Truncated() && v.Checksum != "" && page.Checksum == v.Checksum
	if !notModified && !sameBody {
		page.Revisit = events.RevisitChanged
		return false
	}
	page.Revisit = events.RevisitUnchanged
	// the validators the page still has: the answer's, else the stored
	if page.ETag == "" {
		page.ETag = v.ETag
	}
	if page.LastModified == "" {
		page.LastModified = v.LastModified
	}
	page.Checksum = v.Checksum
	if notModified {
		page.ContentHash, page.Bytes = "", 0
	}
	profile := warc.ProfileIdenticalPayloadDigest
	if notModified {
		profile = warc.ProfileServerNotModified
	}
	page.WARC = s.storeExchange(c, u, res, profile)
	s.addEvent(c, page)
	return true
}
