// Package workapi is the master's work API: slaves on machines you do not
// trust get and return work through it, holding a token and no Redis or
// MySQL credential (the protocol: shared/workapi; the slave's side:
// slave/workclient).
//
// The master runs the frontier's functions on the slave's behalf, as that
// slave, so every check the functions make is made by code the slave does
// not run; on top of them the API takes the slave and the crawl from the
// token, plans each link's task itself (canonical form, scope, traps, the
// rule files' routing and politeness: Planner), binds events to the
// token's slave (they go to its own stream, which the sink checks them
// against), and keeps each token within its limits: leases held, requests
// a second, body size, links a completion. A slave over a limit is slowed
// (429 with Retry-After) or refused (413), and recorded.
//
// Several masters may serve the API at once (behind a load balancer, or a
// slave given several URLs): a server keeps nothing a request needs but a
// short cache of tokens and its rate buckets.
package workapi

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/ratelog"
	"github.com/redcrawl/redcrawl/shared/urlx"
	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// Frontier is what the API needs of the crawl's frontier
// (frontier.Redis), every call made as the token's slave.
type Frontier interface {
	ClaimWaitOpts(ctx context.Context, slave string, max int, opts frontier.ClaimOptions) (frontier.ClaimResult, error)
	CompleteClaim(ctx context.Context, slave string, cs []frontier.Completion, max int, opts frontier.ClaimOptions) ([]bool, frontier.ClaimResult, error)
	Complete(ctx context.Context, slave string, cs []frontier.Completion) ([]bool, error)
	Extend(ctx context.Context, slave string, leases []frontier.Lease) ([]bool, error)
	HeartbeatControl(ctx context.Context, hb events.Heartbeat) (frontier.Control, error)
	Leave(ctx context.Context, slave, detail string) error
	GetRules(ctx context.Context) (version string, blob []byte, ok bool, err error)
	GetRobots(ctx context.Context, host string) (frontier.RobotsRecord, bool, error)
	PublishAs(ctx context.Context, slave string, evs []frontier.Event) error
	SubscribeRules(ctx context.Context) (<-chan string, func(), error)
	NumShards() int
}

// Token is an issued token as the API needs it.
type Token struct {
	ID      int64
	Crawl   string
	Slave   string
	Revoked bool
	// MaxInFlight and Rate replace Limits' for this token; 0 = Limits'.
	MaxInFlight int
	Rate        float64
}

// TokenStore finds tokens by the SHA-256 of the token (store.TokenByHash).
type TokenStore interface {
	TokenByHash(ctx context.Context, token string) (Token, bool, error)
}

// Planner makes the task of a link a slave reported: ok is false for a
// link out of the crawl's scope or the rule files'; policy, when set, is
// its host's politeness from the rule files. Known reports a link that
// can be left out unplanned: one the frontier already put through the
// seen set, when planning it would set no host's politeness either (a
// completion's links are mostly links found before; planning one costs
// more than the rest of its way through the API).
type Planner interface {
	Link(l api.Link) (t frontier.Task, policy *frontier.HostPolicy, ok bool)
	Known(url string) bool
}

// Limits bound what one token may do.
type Limits struct {
	// MaxInFlight is the most leases a token's slave holds (per shard).
	MaxInFlight int
	// Rate is the requests a second a token may make, with bursts of
	// twice as many (at least 10).
	Rate float64
	// MaxBody is the largest request body, in bytes.
	MaxBody int64
	// MaxLinks is the most links of one completion.
	MaxLinks int
}

// Options configure a Server.
type Options struct {
	Crawl   string
	Front   Frontier
	Tokens  TokenStore
	Planner Planner
	Limits  Limits
	// Library names the frontier's functions library (Hello).
	Library string
	Log     *slog.Logger
	RL      *ratelog.Logger
	// Limited, when set, counts requests refused or slowed by a limit
	// (metrics): the slave and which limit.
	Limited func(slave, limit string)
	// Served, when set, times every request but the watches' by path
	// (metrics), refused ones included.
	Served func(path string, d time.Duration)
	// TokenCache is how long a token looked up stays trusted (a revoked
	// token is refused after at most that); 0 = 2 s.
	TokenCache time.Duration
	// WatchWait is the longest a watch waits; 0 = 25 s.
	WatchWait time.Duration
}

// Server serves the work API.
type Server struct {
	opt    Options
	tokens tokenCache
	rates  rateLimiter
	watch  *watcher
	// stopping ends the watches waiting (Stop), so that a server shutting
	// down need not wait WatchWait for them
	stopping context.Context
	stop     context.CancelFunc
	// noted rate-limits the exceptions that record a slave over a limit:
	// one a minute per token and limit
	noted sync.Map // string -> time.Time
}

// New returns a server; Run must run for watches to see changes.
func New(opt Options) *Server {
	if opt.TokenCache <= 0 {
		opt.TokenCache = 2 * time.Second
	}
	if opt.WatchWait <= 0 {
		opt.WatchWait = 25 * time.Second
	}
	s := &Server{opt: opt, watch: newWatcher()}
	s.stopping, s.stop = context.WithCancel(context.Background())
	s.tokens = tokenCache{ttl: opt.TokenCache, m: map[string]cachedToken{}}
	s.rates = rateLimiter{buckets: map[int64]*bucket{}}
	return s
}

// Run follows the rules channel for the watches until ctx ends.
func (s *Server) Run(ctx context.Context) { s.watch.run(ctx, s.opt.Front, s.opt.RL) }

// Stop answers the watches waiting now, and every later one at once
// (nothing new): call it before shutting the HTTP server down, which
// otherwise waits for them.
func (s *Server) Stop() { s.stop() }

// Handler returns the API's HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathHello, s.serve(api.PathHello, s.hello))
	mux.HandleFunc("POST "+api.PathClaim, s.serve(api.PathClaim, s.claim))
	mux.HandleFunc("POST "+api.PathComplete, s.serve(api.PathComplete, s.complete))
	mux.HandleFunc("POST "+api.PathExtend, s.serve(api.PathExtend, s.extend))
	mux.HandleFunc("POST "+api.PathHeartbeat, s.serve(api.PathHeartbeat, s.heartbeat))
	mux.HandleFunc("POST "+api.PathLeave, s.serve(api.PathLeave, s.leave))
	mux.HandleFunc("GET "+api.PathRules, s.serve(api.PathRules, s.rules))
	mux.HandleFunc("GET "+api.PathRobots, s.serve(api.PathRobots, s.robots))
	mux.HandleFunc("POST "+api.PathEvents, s.serve(api.PathEvents, s.events))
	mux.HandleFunc("GET "+api.PathWatch, s.serveWatch)
	return mux
}

// request is one authenticated request.
type request struct {
	r     *http.Request
	token Token
}

// errRefused is a request the API refuses, with its status.
type errRefused struct {
	status int
	msg    string
}

func (e *errRefused) Error() string { return e.msg }

func refuse(status int, msg string) error { return &errRefused{status: status, msg: msg} }

// serve authenticates, rate-limits and answers a request with fn's value.
func (s *Server) serve(path string, fn func(ctx context.Context, q request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.opt.Served != nil {
			start := time.Now()
			defer func() { s.opt.Served(path, time.Since(start)) }()
		}
		q, ok := s.admit(w, r)
		if !ok {
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.opt.Limits.MaxBody)
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		v, err := fn(ctx, q)
		if err != nil {
			s.fail(w, q, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// admit authenticates a request and applies its token's rate; it answers
// a refused one itself.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (request, bool) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		writeJSON(w, http.StatusUnauthorized, api.Error{Error: "no token: Authorization: Bearer <token>"})
		return request{}, false
	}
	tok, err := s.tokens.get(r.Context(), s.opt.Tokens, raw)
	switch {
	case err != nil:
		s.opt.RL.Log(r.Context(), slog.LevelWarn, "api-tokens", "work API: look up token", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "tokens unavailable: try again"})
		return request{}, false
	case tok.ID == 0:
		writeJSON(w, http.StatusUnauthorized, api.Error{Error: "unknown token"})
		return request{}, false
	case tok.Revoked:
		writeJSON(w, http.StatusForbidden, api.Error{Error: "token revoked"})
		return request{}, false
	case tok.Crawl != s.opt.Crawl:
		writeJSON(w, http.StatusForbidden, api.Error{Error: "token of another crawl"})
		return request{}, false
	}
	q := request{r: r, token: tok}
	rate := s.opt.Limits.Rate
	if tok.Rate > 0 {
		rate = tok.Rate
	}
	if wait := s.rates.take(tok.ID, rate, time.Now()); wait > 0 {
		s.limited(q, "rate", "over "+strconv.FormatFloat(rate, 'g', -1, 64)+" requests a second")
		w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
		writeJSON(w, http.StatusTooManyRequests, api.Error{Error: "over the token's request rate"})
		return request{}, false
	}
	return q, true
}

// fail answers a request with its error.
func (s *Server) fail(w http.ResponseWriter, q request, err error) {
	var ref *errRefused
	switch {
	case errors.As(err, &ref):
		if ref.status == http.StatusRequestEntityTooLarge {
			s.limited(q, "size", ref.msg)
		}
		writeJSON(w, ref.status, api.Error{Error: ref.msg})
	case errors.Is(err, api.ErrTooLarge) || isMaxBytes(err):
		s.limited(q, "size", "request body over "+strconv.FormatInt(s.opt.Limits.MaxBody, 10)+" bytes")
		writeJSON(w, http.StatusRequestEntityTooLarge, api.Error{Error: "request body too large"})
	case errors.Is(err, frontier.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "frontier unavailable: try again"})
	case strings.Contains(err.Error(), "ERR redcrawl: "):
		writeJSON(w, http.StatusBadRequest, api.Error{Error: clip(err.Error(), 300)})
	default:
		s.opt.RL.Log(q.r.Context(), slog.LevelWarn, "api-"+q.r.URL.Path, "work API request failed",
			"slave", q.token.Slave, "path", q.r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, api.Error{Error: "internal error"})
	}
}

func isMaxBytes(err error) bool {
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}

// limited counts and records a slave over a limit: a metric each time, an
// exception on its stream at most once a minute per limit.
func (s *Server) limited(q request, limit, msg string) {
	if s.opt.Limited != nil {
		s.opt.Limited(q.token.Slave, limit)
	}
	key := strconv.FormatInt(q.token.ID, 10) + "/" + limit
	now := time.Now()
	if last, ok := s.noted.Load(key); ok && now.Sub(last.(time.Time)) < time.Minute {
		return
	}
	s.noted.Store(key, now)
	ev, err := frontier.NewEvent(&events.Exception{Crawl: s.opt.Crawl, Kind: events.KindAPILimit, Slave: q.token.Slave,
		Message: "work API: " + msg + " (" + q.r.URL.Path + ")", At: now.UnixMilli()})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(q.r.Context()), 5*time.Second)
		defer cancel()
		_ = s.opt.Front.PublishAs(ctx, q.token.Slave, []frontier.Event{ev})
	}
	s.opt.RL.Log(q.r.Context(), slog.LevelWarn, "api-limit-"+key, "work API: a slave over its limit",
		"slave", q.token.Slave, "limit", limit, "detail", msg)
}

func (s *Server) hello(_ context.Context, q request) (any, error) {
	return api.Hello{Crawl: s.opt.Crawl, Slave: q.token.Slave, Shards: s.opt.Front.NumShards(), Library: s.opt.Library}, nil
}

// decode reads a request's body into v.
func (s *Server) decode(q request, v any) error {
	return api.Decode(q.r.Body, s.opt.Limits.MaxBody, v)
}

func (s *Server) claimOpts(q request, c api.ClaimRequest) (frontier.ClaimOptions, error) {
	if c.Max < 1 || c.Max > 1000 {
		return frontier.ClaimOptions{}, refuse(http.StatusBadRequest, "claim: max must be in [1, 1000]")
	}
	held := s.opt.Limits.MaxInFlight
	if q.token.MaxInFlight > 0 {
		held = q.token.MaxInFlight
	}
	return frontier.ClaimOptions{Render: c.Render, MaxHeld: held}, nil
}

func (s *Server) claim(ctx context.Context, q request) (any, error) {
	var c api.ClaimRequest
	if err := s.decode(q, &c); err != nil {
		return nil, refuseDecode(err)
	}
	opts, err := s.claimOpts(q, c)
	if err != nil {
		return nil, err
	}
	res, err := s.opt.Front.ClaimWaitOpts(ctx, q.token.Slave, c.Max, opts)
	if err != nil {
		return nil, err
	}
	return claimResponse(res), nil
}

func (s *Server) complete(ctx context.Context, q request) (any, error) {
	var c api.CompleteRequest
	if err := s.decode(q, &c); err != nil {
		return nil, refuseDecode(err)
	}
	if len(c.Completions) > 1000 {
		return nil, refuse(http.StatusRequestEntityTooLarge, "complete: more than 1000 completions")
	}
	cs := make([]frontier.Completion, len(c.Completions))
	for i, wc := range c.Completions {
		fc, err := s.completion(q, wc)
		if err != nil {
			return nil, err
		}
		cs[i] = fc
	}
	var out api.CompleteResponse
	if c.Claim != nil {
		opts, err := s.claimOpts(q, *c.Claim)
		if err != nil {
			return nil, err
		}
		acked, res, err := s.opt.Front.CompleteClaim(ctx, q.token.Slave, cs, c.Claim.Max, opts)
		if err != nil {
			return nil, err
		}
		cr := claimResponse(res)
		out = api.CompleteResponse{Acked: acked, Claim: &cr}
	} else {
		acked, err := s.opt.Front.Complete(ctx, q.token.Slave, cs)
		if err != nil {
			return nil, err
		}
		out.Acked = acked
	}
	if out.Acked == nil {
		out.Acked = []bool{}
	}
	return out, nil
}

// completion makes a slave's completion the frontier's: its links planned
// by the master, its events checked, its lease the slave's own.
func (s *Server) completion(q request, wc api.Completion) (frontier.Completion, error) {
	var c frontier.Completion
	switch wc.Outcome {
	case api.OutcomeDone:
		c.Outcome = frontier.Done
	case api.OutcomeRetry:
		c.Outcome = frontier.Retry
	case api.OutcomeFail:
		c.Outcome = frontier.Fail
	case api.OutcomeRelease:
		c.Outcome = frontier.Release
	default:
		return c, refuse(http.StatusBadRequest, "complete: unknown outcome")
	}
	l, err := s.leaseRef(wc.Lease)
	if err != nil {
		return c, err
	}
	c.Lease = l
	if len(wc.Links) > s.opt.Limits.MaxLinks {
		return c, refuse(http.StatusRequestEntityTooLarge, "complete: more than "+strconv.Itoa(s.opt.Limits.MaxLinks)+" links in a completion")
	}
	if wc.ContentHash != "" {
		b, err := hex.DecodeString(wc.ContentHash)
		if err != nil || len(b) != 8 {
			return c, refuse(http.StatusBadRequest, "complete: content_hash must be 16 hex digits")
		}
		for _, x := range b {
			c.ContentHash = c.ContentHash<<8 | uint64(x)
		}
	}
	c.HostDelay = time.Duration(max(wc.HostDelayMs, 0)) * time.Millisecond
	c.Backoff = time.Duration(max(wc.BackoffMs, 0)) * time.Millisecond
	c.RetryIn = time.Duration(max(wc.RetryInMs, 0)) * time.Millisecond
	c.Reason = clip(wc.Reason, 1024)
	if c.Events, err = checkEvents(wc.Events); err != nil {
		return c, err
	}
	if c.Outcome != frontier.Done {
		return c, nil
	}
	for _, wl := range wc.Links {
		if s.opt.Planner.Known(wl.URL) {
			continue
		}
		t, policy, ok := s.opt.Planner.Link(wl)
		if !ok {
			continue
		}
		c.Links = append(c.Links, t)
		if policy != nil {
			if c.Policies == nil {
				c.Policies = map[string]frontier.HostPolicy{}
			}
			c.Policies[t.Host] = *policy
		}
	}
	return c, nil
}

// leaseRef is the lease a slave names: its URL, token and shard, checked
// for form (whether the slave holds it is the frontier's to say).
func (s *Server) leaseRef(r api.LeaseRef) (frontier.Lease, error) {
	if r.URL == "" || len(r.URL) > urlx.MaxURLLength || r.Shard < 0 || r.Shard >= s.opt.Front.NumShards() {
		return frontier.Lease{}, refuse(http.StatusBadRequest, "lease: URL empty or too long, or no such shard")
	}
	l := frontier.Lease{Token: r.Token, Shard: r.Shard}
	l.URL = r.URL
	if u, err := url.Parse(r.URL); err == nil {
		l.Host = urlx.HostKey(u)
	}
	return l, nil
}

// checkEvents checks the types and sizes of a slave's events; what they
// say is the sink's to check against the slave's stream.
func checkEvents(evs []api.Event) ([]frontier.Event, error) {
	if len(evs) > 10000 {
		return nil, refuse(http.StatusRequestEntityTooLarge, "more than 10000 events")
	}
	out := make([]frontier.Event, 0, len(evs))
	for _, e := range evs {
		if !events.KnownType(e.Type) {
			return nil, refuse(http.StatusBadRequest, "unknown event type")
		}
		if len(e.Data) > 1<<20 {
			return nil, refuse(http.StatusRequestEntityTooLarge, "an event over 1 MiB")
		}
		out = append(out, frontier.Event{Type: e.Type, Data: e.Data})
	}
	return out, nil
}

func (s *Server) extend(ctx context.Context, q request) (any, error) {
	var e api.ExtendRequest
	if err := s.decode(q, &e); err != nil {
		return nil, refuseDecode(err)
	}
	if len(e.Leases) > 10000 {
		return nil, refuse(http.StatusRequestEntityTooLarge, "extend: more than 10000 leases")
	}
	ls := make([]frontier.Lease, len(e.Leases))
	for i, r := range e.Leases {
		l, err := s.leaseRef(r)
		if err != nil {
			return nil, err
		}
		ls[i] = l
	}
	held, err := s.opt.Front.Extend(ctx, q.token.Slave, ls)
	if err != nil {
		return nil, err
	}
	if held == nil {
		held = []bool{}
	}
	return api.ExtendResponse{Held: held}, nil
}

func (s *Server) heartbeat(ctx context.Context, q request) (any, error) {
	var h api.HeartbeatRequest
	if err := s.decode(q, &h); err != nil {
		return nil, refuseDecode(err)
	}
	hb := h.Heartbeat
	hb.Slave, hb.Crawl = q.token.Slave, s.opt.Crawl
	ctl, err := s.opt.Front.HeartbeatControl(ctx, hb)
	if err != nil {
		return nil, err
	}
	return api.HeartbeatResponse{Drain: ctl.Drain, RetiredProxies: ctl.RetiredProxies, Finished: ctl.Finished}, nil
}

func (s *Server) leave(ctx context.Context, q request) (any, error) {
	var l api.LeaveRequest
	if err := s.decode(q, &l); err != nil {
		return nil, refuseDecode(err)
	}
	if err := s.opt.Front.Leave(ctx, q.token.Slave, clip(l.Detail, 1024)); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (s *Server) rules(ctx context.Context, _ request) (any, error) {
	v, blob, ok, err := s.opt.Front.GetRules(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return api.RulesResponse{}, nil
	}
	return api.RulesResponse{Version: v, Blob: blob}, nil
}

// robots returns a host's shared robots.txt record. A slave of the API
// reads the records other slaves and the master wrote but writes none: a
// record it made up would make every slave obey it (workclient keeps the
// ones it fetches to itself).
func (s *Server) robots(ctx context.Context, q request) (any, error) {
	host := q.r.URL.Query().Get("host")
	if host == "" || len(host) > 300 {
		return nil, refuse(http.StatusBadRequest, "robots: host missing or too long")
	}
	rec, ok, err := s.opt.Front.GetRobots(ctx, host)
	if err != nil {
		return nil, err
	}
	if !ok {
		return api.RobotsResponse{}, nil
	}
	return api.RobotsResponse{Found: true, FetchedAt: rec.FetchedAt.UnixMilli(), Status: rec.Status,
		Body: string(rec.Body), TTLMs: rec.TTL.Milliseconds()}, nil
}

func (s *Server) events(ctx context.Context, q request) (any, error) {
	var e api.EventsRequest
	if err := s.decode(q, &e); err != nil {
		return nil, refuseDecode(err)
	}
	evs, err := checkEvents(e.Events)
	if err != nil {
		return nil, err
	}
	if err := s.opt.Front.PublishAs(ctx, q.token.Slave, evs); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// serveWatch answers when the published rule set is not the slave's
// (?rules=), or work is queued from outside, or after WatchWait.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request) {
	q, ok := s.admit(w, r)
	if !ok {
		return
	}
	_ = q
	have := r.URL.Query().Get("rules")
	var seen *uint64
	if v := r.URL.Query().Get("work"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, api.Error{Error: "work: want the seq of the last watch"})
			return
		}
		seen = &n
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opt.WatchWait)
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	writeJSON(w, http.StatusOK, s.watch.wait(ctx, have, seen))
}

func refuseDecode(err error) error {
	if errors.Is(err, api.ErrTooLarge) || isMaxBytes(err) {
		return err
	}
	return refuse(http.StatusBadRequest, clip(err.Error(), 200))
}

func claimResponse(res frontier.ClaimResult) api.ClaimResponse {
	out := api.ClaimResponse{Leases: make([]api.Lease, len(res.Leases)), WaitMs: res.Wait.Milliseconds(),
		Busy: res.Busy, RulesVersion: res.RulesVersion}
	if res.Wait < 0 {
		out.WaitMs = -1
	}
	for i, l := range res.Leases {
		wl := api.Lease{URL: l.URL, Host: l.Host, Depth: l.Depth, Hops: l.Hops, Attempt: l.Attempt,
			Priority: l.Priority, Importance: l.Importance, Render: l.Render, Sitemap: l.Sitemap,
			SitemapAnyHost: l.SitemapAnyHost, LastMod: l.LastMod, Token: l.Token,
			LeasedAt: l.LeasedAt.UnixMilli(), Deadline: l.Deadline.UnixMilli(), Shard: l.Shard}
		if l.Revisit != nil {
			wl.Revisit = &api.Validators{ETag: l.Revisit.ETag, LastModified: l.Revisit.LastModified, Checksum: l.Revisit.Checksum}
		}
		out.Leases[i] = wl
	}
	return out
}

// clip cuts s to at most n bytes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
