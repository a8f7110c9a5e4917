package slaved

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/netguard"
)

// Fetcher fetches one URL without following redirects.
type Fetcher interface {
	Fetch(ctx context.Context, rawURL string) (*Response, error)
}

// Response is a fetched page. A redirect is a response like any other:
// its Location is for the frontier to schedule.
type Response struct {
	Status    int
	Header    http.Header
	Body      []byte
	Truncated bool // the body was larger than fetch.max_body_bytes
	Duration  time.Duration
}

// FetchError is a typed fetch failure.
type FetchError struct {
	Kind      string // one of the events.Kind* values
	Retryable bool
	Err       error
}

func (e *FetchError) Error() string { return e.Kind + ": " + e.Err.Error() }
func (e *FetchError) Unwrap() error { return e.Err }

// collyFetcher fetches with one colly collector and one transport for the
// whole slave. Colly's own robots.txt handling, revisit tracking and
// redirect following are off: robots.txt is shared through the frontier,
// dedup is the frontier's, and a redirect target goes through the frontier
// like a discovered link.
type collyFetcher struct {
	c       *colly.Collector
	maxBody int64
	// closeIdle closes the transport's idle keep-alive connections.
	closeIdle func()
}

// fetchSlot receives one request's outcome from the collector's callbacks;
// it travels in the request's colly.Context.
type fetchSlot struct {
	resp *colly.Response
	err  error
}

const slotKey = "redcrawl.slot"

func newCollyFetcher(ctx context.Context, cfg *config.Config) *collyFetcher {
	dialer := netguard.Dialer(cfg.Fetch.Timeout, cfg.Fetch.AllowPrivateNetworks)
	base := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		MaxIdleConns:          cfg.Slave.Concurrency * 2,
		MaxIdleConnsPerHost:   max(2, cfg.Politeness.HostConcurrency),
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: cfg.Fetch.Timeout,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
	c := colly.NewCollector(
		colly.UserAgent(cfg.Fetch.UserAgent),
		colly.AllowURLRevisit(),
		colly.IgnoreRobotsTxt(),
		colly.ParseHTTPErrorResponse(),
		colly.StdlibContext(ctx),
		// colly's own cap is a backstop; limitTransport enforces the real one
		colly.MaxBodySize(int(cfg.Fetch.MaxBodyBytes)+1),
	)
	c.WithTransport(&limitTransport{base: base, max: cfg.Fetch.MaxBodyBytes})
	closeIdle := base.CloseIdleConnections
	c.SetRequestTimeout(cfg.Fetch.Timeout)
	c.SetRedirectHandler(func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse })
	c.DisableCookies()
	c.OnResponse(func(r *colly.Response) {
		if s := slotOf(r.Ctx); s != nil {
			s.resp = r
		}
	})
	c.OnError(func(r *colly.Response, err error) {
		if s := slotOf(r.Ctx); s != nil {
			s.resp, s.err = r, err
		}
	})
	return &collyFetcher{c: c, maxBody: cfg.Fetch.MaxBodyBytes, closeIdle: closeIdle}
}

func slotOf(ctx *colly.Context) *fetchSlot {
	if ctx == nil {
		return nil
	}
	s, _ := ctx.GetAny(slotKey).(*fetchSlot)
	return s
}

// Fetch implements Fetcher.
func (f *collyFetcher) Fetch(ctx context.Context, rawURL string) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &fetchSlot{}
	cctx := colly.NewContext()
	cctx.Put(slotKey, s)
	start := time.Now()
	err := f.c.Request(http.MethodGet, rawURL, nil, cctx, nil)
	d := time.Since(start)
	if s.err != nil {
		err = s.err
	}
	if s.resp != nil && s.resp.StatusCode > 0 && (err == nil || s.resp.StatusCode >= 300) {
		r := &Response{Status: s.resp.StatusCode, Body: s.resp.Body, Duration: d}
		if s.resp.Headers != nil {
			r.Header = *s.resp.Headers
		}
		if int64(len(r.Body)) > f.maxBody {
			r.Body, r.Truncated = r.Body[:f.maxBody], true
		}
		return r, nil
	}
	if err == nil {
		err = errors.New("no response")
	}
	return nil, classify(err)
}

// classify turns a transport error into a typed, retryable-or-not error.
func classify(err error) *FetchError {
	var fe *FetchError
	if errors.As(err, &fe) {
		return fe
	}
	var be *netguard.BlockedError
	if errors.As(err, &be) {
		return &FetchError{Kind: events.KindBlocked, Err: err}
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return &FetchError{Kind: events.KindDNS, Retryable: !dnsErr.IsNotFound, Err: err}
	}
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	if errors.As(err, &certErr) || errors.As(err, &recErr) || strings.Contains(err.Error(), "tls: ") || strings.Contains(err.Error(), "x509: ") {
		return &FetchError{Kind: events.KindTLS, Err: err}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) || strings.Contains(err.Error(), "Client.Timeout") {
		return &FetchError{Kind: events.KindTimeout, Retryable: true, Err: err}
	}
	var ue *url.Error
	if errors.As(err, &ue) && strings.Contains(ue.Err.Error(), "unsupported protocol scheme") {
		return &FetchError{Kind: events.KindOther, Err: err}
	}
	var oe *net.OpError
	if errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "connection refused") {
		return &FetchError{Kind: events.KindConnect, Retryable: true, Err: err}
	}
	return &FetchError{Kind: events.KindOther, Retryable: true, Err: err}
}

// limitTransport caps every body on decompressed bytes, whether Go's
// transport decompressed it (it asked for gzip) or the server sent gzip
// unasked, so a gzip bomb stops at the cap with memory bounded.
type limitTransport struct {
	base http.RoundTripper
	max  int64
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body := res.Body
	var r io.Reader = body
	if !res.Uncompressed && strings.EqualFold(strings.TrimSpace(res.Header.Get("Content-Encoding")), "gzip") {
		zr, err := gzip.NewReader(body)
		if err != nil {
			body.Close()
			return nil, &FetchError{Kind: events.KindParse, Err: fmt.Errorf("gzip body: %w", err)}
		}
		r = zr
		res.Header.Del("Content-Encoding")
		res.Header.Del("Content-Length")
		res.ContentLength = -1
		res.Uncompressed = true
	}
	res.Body = &limitedBody{r: io.LimitReader(r, t.max+1), c: body}
	return res, nil
}

type limitedBody struct {
	r io.Reader
	c io.Closer
}

func (b *limitedBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *limitedBody) Close() error               { return b.c.Close() }
