package slaved

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/warc"
)

// storeWARC writes a response and its request to the slave's WARC file and
// returns "file:offset" for the page record, or "" when WARC storage is off
// or failed (a storage failure is an exception, not a lost page).
//
// The stored response is the one the crawler read: decompressed (the
// fetcher drops a Content-Encoding it decoded, Content-Length is set to the
// stored payload and Transfer-Encoding is dropped) and cut at
// fetch.max_body_bytes (the page record then has a too_large exception).
func (s *Slave) storeWARC(c *frontier.Completion, u *url.URL, res *Response) string {
	return s.storeExchange(c, u, res, "")
}

// storeExchange writes a response record, or with a revisit profile a
// revisit record referring to the same URI (recrawl.go), and its request.
func (s *Slave) storeExchange(c *frontier.Completion, u *url.URL, res *Response, profile string) string {
	if s.warc == nil {
		return ""
	}
	ex := warc.Exchange{
		TargetURI:      u.String(),
		Date:           s.now().Add(-res.Duration),
		Request:        res.Request,
		ResponseHeader: responseBlock(res),
		Body:           res.Body.NewReader(),
		BodySize:       res.Body.Size(),
	}
	if profile != "" {
		ex.Profile, ex.RefersToURI = profile, ex.TargetURI
	}
	loc, err := s.warc.WriteExchange(ex)
	if err != nil {
		s.rl.Log(context.Background(), levelWarn, "warc", "write warc record", "profile", profile, "err", err)
		s.exception(c, events.KindOther, res.Status, "warc: "+err.Error())
		return ""
	}
	return loc.File + ":" + strconv.FormatInt(loc.Offset, 10)
}

// responseBlock is the status line and headers of a response as stored.
func responseBlock(res *Response) []byte {
	var b bytes.Buffer
	proto := res.Proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	fmt.Fprintf(&b, "%s %d %s\r\n", proto, res.Status, http.StatusText(res.Status))
	h := res.Header.Clone()
	h.Del("Transfer-Encoding")
	h.Set("Content-Length", strconv.FormatInt(res.Body.Size(), 10))
	h.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}
