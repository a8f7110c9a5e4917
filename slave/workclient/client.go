// Package workclient is a slave's side of the master's work API: the
// frontier as a slave uses it (slaved.Backend), over HTTPS to one of
// several masters, with a token and no Redis or MySQL credential
// (shared/workapi is the protocol; master/workapi serves it).
//
// It speaks HTTP/1.1 with its connections kept alive, one for each
// request in flight (a slave has a handful: its claims, acks, lease
// extensions, heartbeats and a watch), not HTTP/2, which the master also
// serves: Go's HTTP/2 passes each request between several goroutines on
// both sides, and on a busy machine every hand-over waits for a core, so
// a claim took longer and host slots stayed taken: 4 slaves of the API
// crawled 0.80 of what direct slaves did with HTTP/2 and 0.86 with
// HTTP/1.1 (bin/bench --api, median of 7 rounds each, 2 cores).
//
// A master that cannot be reached, or answers that it cannot reach its
// Redis now, is a pause for the slave, as a Redis outage is for a direct
// slave: the call fails with frontier.ErrUnavailable after the client
// tried every URL it was given, starting from the last that answered. A
// 429 (over the token's request rate) waits the Retry-After, then asks
// again.
package workclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// Options configure a Client.
type Options struct {
	// URLs are the masters' API base URLs (https://host:port), tried in
	// turn.
	URLs []string
	// Token is the slave's token (bin/master token issue).
	Token string
	// TLS is the client's TLS config (the masters' CA); nil: the
	// system's roots.
	TLS *tls.Config
	// Crawl and Slave, when set, must be the token's: a slave started
	// with another crawl's config or another id is told so at once.
	Crawl, Slave string
	// Timeout bounds one request (a watch waits longer); 0 = 30 s.
	Timeout time.Duration
	// Transport replaces the HTTP transport (tests).
	Transport http.RoundTripper
}

// maxIdleConns is the connections to a master kept for reuse: more than
// the requests a slave has in flight at once.
const maxIdleConns = 8

// Client is the frontier of a slave of the work API.
type Client struct {
	opt   Options
	http  *http.Client
	cur   atomic.Int64 // the URL to try first
	hello api.Hello

	mu     sync.Mutex
	robots map[string]frontier.RobotsRecord // records this slave fetched itself
}

// ErrToken is a token the master refuses (unknown, revoked, another
// crawl's): an admin must issue a new one.
var ErrToken = errors.New("work API token refused")

// New connects to the first master that answers and checks the token.
func New(ctx context.Context, opt Options) (*Client, error) {
	if len(opt.URLs) == 0 {
		return nil, errors.New("work API: no URL")
	}
	for _, u := range opt.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return nil, fmt.Errorf("work API: URL %q: want https://host:port", u)
		}
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Second
	}
	tr := opt.Transport
	if tr == nil {
		tr = &http.Transport{TLSClientConfig: opt.TLS, MaxIdleConnsPerHost: maxIdleConns,
			IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 10 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
			// HTTP/1.1 (the package doc says why)
			TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
	}
	c := &Client{opt: opt, http: &http.Client{Transport: tr}, robots: map[string]frontier.RobotsRecord{}}
	if err := c.do(ctx, http.MethodGet, api.PathHello, nil, &c.hello); err != nil {
		return nil, fmt.Errorf("work API hello: %w", err)
	}
	if opt.Crawl != "" && c.hello.Crawl != opt.Crawl {
		return nil, fmt.Errorf("%w: the token is for crawl %q, this slave's config names %q", ErrToken, c.hello.Crawl, opt.Crawl)
	}
	if opt.Slave != "" && c.hello.Slave != opt.Slave {
		return nil, fmt.Errorf("%w: the token is slave %q's, this slave is %q", ErrToken, c.hello.Slave, opt.Slave)
	}
	return c, nil
}

// Slave is the token's slave id.
func (c *Client) Slave() string { return c.hello.Slave }

// Hello is what the master said of the token.
func (c *Client) Hello() api.Hello { return c.hello }

// Close releases the client's connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// do sends one request and decodes its answer into out, trying every URL
// from the current one; see the package doc for what fails how.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	return c.doTimeout(ctx, method, path, in, out, c.opt.Timeout)
}

// appender is a request that encodes itself (api.CompleteRequest).
type appender interface{ AppendJSON([]byte) []byte }

func (c *Client) doTimeout(ctx context.Context, method, path string, in, out any, timeout time.Duration) error {
	var body []byte
	if a, ok := in.(appender); ok { // a completion: its own encoder
		buf := getBuf()
		defer putBuf(buf)
		body = a.AppendJSON((*buf)[:0])
		*buf = body
	} else if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		n := len(c.opt.URLs)
		start := int(c.cur.Load())
		for i := range n {
			k := (start + i) % n
			wait, err := c.once(ctx, c.opt.URLs[k]+path, method, body, out, timeout)
			if err == nil {
				c.cur.Store(int64(k))
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if wait > 0 { // over the rate: this master asks to slow down
				c.cur.Store(int64(k))
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
				last = err
				break
			}
			if !errors.Is(err, frontier.ErrUnavailable) {
				return err
			}
			last = err
		}
	}
	return last
}

// once makes one request; wait > 0 asks the caller to wait that long and
// ask again.
func (c *Client) once(ctx context.Context, u, method string, body []byte, out any, timeout time.Duration) (wait time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, fmt.Errorf("work API: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.opt.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: work API %s: %w", frontier.ErrUnavailable, hostOf(u), err)
	}
	defer resp.Body.Close()
	buf := getBuf()
	defer putBuf(buf)
	data, err := readAll(resp.Body, (*buf)[:0], resp.ContentLength)
	*buf = data
	if err != nil {
		return 0, fmt.Errorf("%w: work API %s: read answer: %w", frontier.ErrUnavailable, hostOf(u), err)
	}
	if resp.StatusCode == http.StatusOK {
		if out == nil {
			return 0, nil
		}
		// data's buffer is reused: out keeps none of its bytes (no
		// answer holds a raw JSON value; strings are copied)
		if err := api.Unmarshal(data, out); err != nil {
			return 0, fmt.Errorf("work API %s: decode answer: %w", hostOf(u), err)
		}
		return 0, nil
	}
	var e api.Error
	_ = api.Unmarshal(data, &e)
	msg := fmt.Sprintf("work API %s%s: %d %s", hostOf(u), reqPath(u), resp.StatusCode, e.Error)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return time.Duration(max(secs, 1)) * time.Second, errors.New(msg)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return 0, fmt.Errorf("%w: %s", ErrToken, msg)
	case resp.StatusCode >= 500:
		return 0, fmt.Errorf("%w: %s", frontier.ErrUnavailable, msg)
	}
	return 0, errors.New(msg)
}

func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "?"
	}
	return p.Host
}

func reqPath(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Path
}

// ClaimWaitOpts implements frontier.Frontier.
func (c *Client) ClaimWaitOpts(ctx context.Context, _ string, max int, opts frontier.ClaimOptions) (frontier.ClaimResult, error) {
	if max <= 0 {
		return frontier.ClaimResult{}, nil
	}
	var res api.ClaimResponse
	if err := c.do(ctx, http.MethodPost, api.PathClaim, api.ClaimRequest{Max: min(max, 1000), Render: opts.Render}, &res); err != nil {
		return frontier.ClaimResult{}, fmt.Errorf("claim: %w", err)
	}
	return c.claimResult(res), nil
}

// CompleteClaim implements frontier.Frontier.
func (c *Client) CompleteClaim(ctx context.Context, slave string, cs []frontier.Completion, max int, opts frontier.ClaimOptions) ([]bool, frontier.ClaimResult, error) {
	if len(cs) == 0 {
		res, err := c.ClaimWaitOpts(ctx, slave, max, opts)
		return nil, res, err
	}
	req := api.CompleteRequest{Completions: completions(cs)}
	if max > 0 {
		req.Claim = &api.ClaimRequest{Max: min(max, 1000), Render: opts.Render}
	}
	var res api.CompleteResponse
	if err := c.do(ctx, http.MethodPost, api.PathComplete, &req, &res); err != nil {
		return nil, frontier.ClaimResult{}, fmt.Errorf("complete: %w", err)
	}
	if len(res.Acked) != len(cs) {
		return nil, frontier.ClaimResult{}, fmt.Errorf("complete: %d acks for %d completions", len(res.Acked), len(cs))
	}
	var cr frontier.ClaimResult
	if res.Claim != nil {
		cr = c.claimResult(*res.Claim)
	}
	return res.Acked, cr, nil
}

// Complete implements frontier.Frontier.
func (c *Client) Complete(ctx context.Context, slave string, cs []frontier.Completion) ([]bool, error) {
	acked, _, err := c.CompleteClaim(ctx, slave, cs, 0, frontier.ClaimOptions{})
	return acked, err
}

// Extend implements frontier.Frontier.
func (c *Client) Extend(ctx context.Context, _ string, leases []frontier.Lease) ([]bool, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	req := api.ExtendRequest{Leases: make([]api.LeaseRef, len(leases))}
	for i, l := range leases {
		req.Leases[i] = api.LeaseRef{URL: l.URL, Token: l.Token, Shard: l.Shard}
	}
	var res api.ExtendResponse
	if err := c.do(ctx, http.MethodPost, api.PathExtend, req, &res); err != nil {
		return nil, fmt.Errorf("extend leases: %w", err)
	}
	if len(res.Held) != len(leases) {
		return nil, fmt.Errorf("extend leases: %d answers for %d leases", len(res.Held), len(leases))
	}
	return res.Held, nil
}

// Heartbeat implements frontier.Registry.
func (c *Client) Heartbeat(ctx context.Context, hb events.Heartbeat) error {
	_, err := c.HeartbeatControl(ctx, hb)
	return err
}

// HeartbeatControl is Heartbeat with the admin's requests to this slave.
func (c *Client) HeartbeatControl(ctx context.Context, hb events.Heartbeat) (frontier.Control, error) {
	var res api.HeartbeatResponse
	if err := c.do(ctx, http.MethodPost, api.PathHeartbeat, api.HeartbeatRequest{Heartbeat: hb}, &res); err != nil {
		return frontier.Control{}, fmt.Errorf("heartbeat: %w", err)
	}
	return frontier.Control{Drain: res.Drain, RetiredProxies: res.RetiredProxies, Finished: res.Finished}, nil
}

// Leave implements frontier.Registry.
func (c *Client) Leave(ctx context.Context, _ string, detail string) error {
	if err := c.do(ctx, http.MethodPost, api.PathLeave, api.LeaveRequest{Detail: detail}, nil); err != nil {
		return fmt.Errorf("leave: %w", err)
	}
	return nil
}

// Slaves implements frontier.Registry: a slave of the API sees no other
// slave.
func (c *Client) Slaves(context.Context) ([]frontier.SlaveInfo, error) {
	return nil, errors.New("slaves: not offered by the work API")
}

// Publish implements frontier.Publisher.
func (c *Client) Publish(ctx context.Context, evs []frontier.Event) error {
	if len(evs) == 0 {
		return nil
	}
	req := api.EventsRequest{Events: make([]api.Event, len(evs))}
	for i, e := range evs {
		req.Events[i] = api.Event{Type: e.Type, Data: e.Data}
	}
	if err := c.do(ctx, http.MethodPost, api.PathEvents, req, nil); err != nil {
		return fmt.Errorf("publish events: %w", err)
	}
	return nil
}

// PutRules implements frontier.RulesStore: only the master publishes rules.
func (c *Client) PutRules(context.Context, string, []byte) error {
	return errors.New("put rules: a slave of the work API publishes no rules")
}

// GetRules implements frontier.RulesStore.
func (c *Client) GetRules(ctx context.Context) (string, []byte, bool, error) {
	var res api.RulesResponse
	if err := c.do(ctx, http.MethodGet, api.PathRules, nil, &res); err != nil {
		return "", nil, false, fmt.Errorf("get rules: %w", err)
	}
	return res.Version, res.Blob, res.Version != "", nil
}

// GetRobots returns a host's robots.txt record: one this slave fetched
// itself, else the shared one the master serves.
func (c *Client) GetRobots(ctx context.Context, host string) (frontier.RobotsRecord, bool, error) {
	c.mu.Lock()
	r, ok := c.robots[host]
	c.mu.Unlock()
	if ok && (r.TTL <= 0 || time.Since(r.FetchedAt) < r.TTL) {
		return r, true, nil
	}
	var res api.RobotsResponse
	if err := c.do(ctx, http.MethodGet, api.PathRobots+"?host="+url.QueryEscape(host), nil, &res); err != nil {
		return frontier.RobotsRecord{}, false, fmt.Errorf("get robots.txt: %w", err)
	}
	if !res.Found {
		return frontier.RobotsRecord{}, false, nil
	}
	return frontier.RobotsRecord{FetchedAt: time.UnixMilli(res.FetchedAt), Status: res.Status, Body: []byte(res.Body),
		TTL: time.Duration(res.TTLMs) * time.Millisecond}, true, nil
}

// PutRobots keeps a robots.txt this slave fetched to itself: a slave of
// the API writes no shared record (every slave would obey one it made
// up), so it fetches what no trusted slave or master fetched before.
func (c *Client) PutRobots(_ context.Context, host string, r frontier.RobotsRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.robots) >= 100000 {
		c.robots = map[string]frontier.RobotsRecord{}
	}
	c.robots[host] = r
	return nil
}

// SubscribeRules delivers the rule set versions the master publishes and
// its work announcements (frontier.WorkMessage), from long-polled watches.
func (c *Client) SubscribeRules(ctx context.Context) (<-chan string, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		have, seq := "", "" // the rules in force and the work announcements seen, by the last answer
		for fails := 0; ctx.Err() == nil; {
			var res api.WatchResponse
			q := "?rules=" + url.QueryEscape(have)
			if seq != "" {
				q += "&work=" + seq
			}
			err := c.doTimeout(ctx, http.MethodGet, api.PathWatch+q, nil, &res, 60*time.Second)
			if err != nil {
				fails++
				t := time.NewTimer(time.Duration(min(fails, 30)) * time.Second)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
				continue
			}
			fails = 0
			seq = strconv.FormatUint(res.Seq, 10)
			var msgs []string
			if res.Rules != "" {
				have = res.Rules
				msgs = append(msgs, res.Rules)
			}
			if res.Work {
				msgs = append(msgs, frontier.WorkMessage)
			}
			for _, msg := range msgs {
				select {
				case out <- msg:
				default:
				}
			}
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	return out, stop, nil
}

// claimResult makes the API's claim answer the frontier's.
func (c *Client) claimResult(res api.ClaimResponse) frontier.ClaimResult {
	out := frontier.ClaimResult{Leases: make([]frontier.Lease, 0, len(res.Leases)), Busy: res.Busy, RulesVersion: res.RulesVersion,
		Wait: time.Duration(res.WaitMs) * time.Millisecond}
	if res.WaitMs < 0 {
		out.Wait = -1
	}
	for _, l := range res.Leases {
		t := frontier.Task{URL: l.URL, Host: l.Host, Depth: l.Depth, Hops: l.Hops, Attempt: l.Attempt,
			Priority: l.Priority, Render: l.Render, Sitemap: l.Sitemap, SitemapAnyHost: l.SitemapAnyHost, LastMod: l.LastMod}
		if u, err := url.Parse(l.URL); err == nil {
			t.ScopeHost = strings.ToLower(u.Hostname())
		}
		if l.Revisit != nil {
			t.Revisit = &frontier.Validators{ETag: l.Revisit.ETag, LastModified: l.Revisit.LastModified, Checksum: l.Revisit.Checksum}
		}
		out.Leases = append(out.Leases, frontier.Lease{Task: t, Slave: c.hello.Slave, Token: l.Token,
			LeasedAt: time.UnixMilli(l.LeasedAt), Deadline: time.UnixMilli(l.Deadline), Importance: l.Importance, Shard: l.Shard})
	}
	return out
}

// completions makes the slave's completions the API's: links as URLs with
// where they were found, for the master to plan.
func completions(cs []frontier.Completion) []api.Completion {
	out := make([]api.Completion, len(cs))
	for i, c := range cs {
		wc := api.Completion{Lease: api.LeaseRef{URL: c.Lease.URL, Token: c.Lease.Token, Shard: c.Lease.Shard},
			Outcome: c.Outcome.String(), HostDelayMs: c.HostDelay.Milliseconds(), BackoffMs: c.Backoff.Milliseconds(),
			RetryInMs: c.RetryIn.Milliseconds(), Reason: c.Reason}
		if c.ContentHash != 0 {
			wc.ContentHash = fmt.Sprintf("%016x", c.ContentHash)
		}
		if len(c.Events) > 0 {
			wc.Events = make([]api.Event, len(c.Events))
			for j, e := range c.Events {
				wc.Events[j] = api.Event{Type: e.Type, Data: e.Data}
			}
		}
		if len(c.Links) > 0 {
			wc.Links = make([]api.Link, len(c.Links))
			for j, l := range c.Links {
				wc.Links[j] = api.Link{URL: l.URL, Depth: l.Depth, Hops: l.Hops, Sitemap: l.Sitemap,
					SitemapAnyHost: l.SitemapAnyHost, LastMod: l.LastMod}
			}
		}
		out[i] = wc
	}
	return out
}

// maxAnswer bounds an answer the client reads.
const maxAnswer = 64 << 20

// readAll reads r (at most maxAnswer bytes, n if known) into buf.
func readAll(r io.Reader, buf []byte, n int64) ([]byte, error) {
	if n > 0 && n <= maxAnswer && int64(cap(buf)) < n+1 {
		buf = make([]byte, 0, n+1)
	}
	w := bytes.NewBuffer(buf)
	_, err := w.ReadFrom(io.LimitReader(r, maxAnswer))
	return w.Bytes(), err
}

// bufs holds the buffers of request bodies and answers: a completion's
// body and its answer are tens of KiB, and a slave sends several a
// second.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// maxPooledBuf is the largest buffer kept for reuse (a sitemap's
// completion can be megabytes).
const maxPooledBuf = 1 << 20

func getBuf() *[]byte { return bufs.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= maxPooledBuf {
		bufs.Put(b)
	}
}
