// Package workapi is the master's work API: slaves on machines you do not
// trust get and return work through it, holding a token and no Redis or
// MySQL credential (the protocol: shared/workapi; the slave's side:
// slave/workclient).
//
// The master runs the frontier's functions on the slave's behalf, as that
// slave, so every check the functions make is made by code the slave does
// not run; on top of them the API takes the slave and the crawl from the
// token, and believes the slave only about the leases it holds (judge.go):
// a completion's records must be about its lease's URL, the master sets
// what it knows (times within the lease, the crawl, the slave, the depth
// of every link from the lease's), plans each link's task itself
// (canonical form, scope, traps, the rule files' routing and politeness:
// Planner), and keeps the slave's content hashes to its own pages. It
// keeps each token within its limits: leases held, requests a second and
// at once, body size and the records in it (counted as the body is
// decoded), bytes of events a second, the unread events of its stream;
// and every request together within a budget of bytes being decoded. A
// slave over a limit is slowed (429 with Retry-After) or refused (413),
// and recorded; a record about no lease of its is refused and recorded
// (invalid_input).
//
// Several masters may serve the API at once (behind a load balancer, or a
// slave given several URLs): a server keeps nothing a request needs but a
// short cache of tokens and its rate buckets.
package workapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
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
	HeldLeases(ctx context.Context, slave string, leases []frontier.Lease) ([]frontier.Lease, []bool, error)
	SlaveStreamBytes(ctx context.Context, slave string, shard int) (int64, error)
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
	// EventRate is the bytes of events (records of completions and
	// /events) a second a token may send, with bursts of four times as
	// many (at least MaxBody); 0 = no limit.
	EventRate float64
	// MaxStream is the most bytes of events a slave's stream (on a shard)
	// may hold that the sink has not stored: past it the slave's events
	// wait (429) until the sink catches up; 0 = no limit.
	MaxStream int64
	// DecodeBudget is the most bytes of request bodies the API reads and
	// decodes at once, all tokens together: a request that finds no room
	// within budgetWait is answered 503; 0 = no limit.
	DecodeBudget int64
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
	// Invalid, when set, counts records refused as about no lease the
	// token held (metrics): the slave and what (judge.go).
	Invalid func(slave, what string)
	// MaxRedirects is the crawl's crawl.max_redirects: a redirect a slave
	// reports past it is refused.
	MaxRedirects int
	// Served, when set, times every request but the watches' by path
	// (metrics), refused ones included.
	Served func(path string, d time.Duration)
	// TokenCache is how long a token looked up stays trusted (a revoked
	// token is refused after at most that); 0 = 2 s.
	TokenCache time.Duration
	// WatchWait is the longest a watch waits; 0 = 25 s.
	WatchWait time.Duration
	// UploadGrace is how long a body may take to arrive on top of its
	// size at minUploadRate; 0 = 5 s (paced).
	UploadGrace time.Duration
}

// Server serves the work API.
type Server struct {
	opt     Options
	tokens  tokenCache
	rates   rateLimiter
	evBytes rateLimiter
	busy    inFlight
	// budget holds the bytes of the large bodies being decoded
	// (DecodeBudget), small the small bodies' (smallBody): two lanes, so
	// that a slave's heartbeats, claims and usual completions never wait
	// behind largest bodies a flood keeps uploading
	budget, small *fairBudget
	// streams caches the sizes of slaves' streams (MaxStream)
	streams streamSizes
	// served remembers the leases claims handed out, for their
	// completions (served.go)
	served *servedLeases
	// beats remembers whether each slave was told the crawl is finished
	// (beats.go)
	beats beats
	watch *watcher
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
	if opt.UploadGrace <= 0 {
		opt.UploadGrace = 5 * time.Second
	}
	s := &Server{opt: opt, watch: newWatcher()}
	s.stopping, s.stop = context.WithCancel(context.Background())
	s.tokens = newTokenCache(opt.TokenCache)
	s.rates = rateLimiter{buckets: map[int64]*bucket{}}
	s.evBytes = rateLimiter{buckets: map[int64]*bucket{}}
	s.busy = inFlight{n: map[int64]int{}}
	s.streams = streamSizes{m: map[streamKey]streamSize{}}
	s.served = newServedLeases(servedPerSlave(opt), maxServedLeases)
	if opt.Limits.DecodeBudget > 0 {
		s.budget = newFairBudget(opt.Limits.DecodeBudget)
		s.small = newFairBudget(max(opt.Limits.DecodeBudget/4, smallBody))
	}
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
	// received is when the master began to serve it: the latest time a
	// record of it may carry
	received time.Time
}

// errRefused is a request the API refuses, with its status (and, for a
// 429, when to come back).
type errRefused struct {
	status     int
	msg        string
	retryAfter time.Duration
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
		if !s.busy.enter(q.token.ID) {
			s.limited(q, "concurrency", "over "+strconv.Itoa(maxConcurrent)+" requests at once")
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, api.Error{Error: "over the token's requests at once"})
			return
		}
		defer s.busy.leave(q.token.ID)
		release, ok := s.reserve(w, q)
		if !ok {
			return
		}
		defer release()
		r.Body = http.MaxBytesReader(w, s.paced(w, r), s.opt.Limits.MaxBody)
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		q.received = time.Now()
		v, err := fn(ctx, q)
		if err != nil {
			s.fail(w, q, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// reserve takes room for the request's body in the decode budget, in
// the lane of its size (Server.budget, Server.small): its Content-Length
// (a body without one is refused: 411), waiting at most budgetWait (then
// 503). It answers a refused request itself.
func (s *Server) reserve(w http.ResponseWriter, q request) (release func(), ok bool) {
	r := q.r
	if r.Method != http.MethodPost {
		return func() {}, true
	}
	n := r.ContentLength
	switch {
	case n < 0:
		writeJSON(w, http.StatusLengthRequired, api.Error{Error: "a request body needs a Content-Length"})
		return nil, false
	case n > s.opt.Limits.MaxBody:
		s.limited(q, "size", "request body over "+strconv.FormatInt(s.opt.Limits.MaxBody, 10)+" bytes")
		writeJSON(w, http.StatusRequestEntityTooLarge, api.Error{Error: "request body too large"})
		return nil, false
	case s.budget == nil || n == 0:
		return func() {}, true
	}
	lane := s.budget
	if n <= smallBody {
		lane = s.small
	}
	ctx, cancel := context.WithTimeout(r.Context(), budgetWait)
	defer cancel()
	if err := lane.acquire(ctx, budgetKey(q.token), n); err != nil {
		s.limited(q, "budget", "the master was decoding "+strconv.FormatInt(lane.capacity, 10)+
			" bytes of requests of this size already")
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: "the master is busy: try again"})
		return nil, false
	}
	return func() { lane.release(budgetKey(q.token), n) }, true
}

// paced is r's body, read by a deadline of UploadGrace plus its length
// at minUploadRate: a token that uploads slowly holds its room in the
// decode budget that long at most, not the server's ReadTimeout. The
// deadline is lifted once the body is read, as the handler's work (and
// a background read that waits for the next request) runs on.
func (s *Server) paced(w http.ResponseWriter, r *http.Request) io.ReadCloser {
	if r.ContentLength <= 0 {
		return r.Body
	}
	rc := http.NewResponseController(w)
	d := s.opt.UploadGrace + time.Duration(r.ContentLength*int64(time.Second)/minUploadRate)
	if rc.SetReadDeadline(time.Now().Add(d)) != nil {
		return r.Body // a connection without deadlines: ReadTimeout alone
	}
	return &pacedBody{ReadCloser: r.Body, rc: rc, left: r.ContentLength}
}

// pacedBody lifts its read deadline once its last byte is read.
type pacedBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	left int64
	done bool
}

func (b *pacedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	// all of it read: a read that failed (the deadline passed) keeps the
	// deadline, or the server, which reads what a handler left of a body
	// before the next request, would wait for the rest without one
	if !b.done && (b.left <= 0 || err == io.EOF) {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// admit authenticates a request and applies its token's rate; it answers
// a refused one itself.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (request, bool) {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		writeJSON(w, http.StatusUnauthorized, api.Error{Error: "no token: Authorization: Bearer <token>"})
		return request{}, false
	}
	tok, err := s.tokens.get(r.Context(), s.opt.Tokens, raw, addrKey(r.RemoteAddr))
	switch {
	case errors.Is(err, errLookupLimited):
		w.Header().Set("Retry-After", "10")
		writeJSON(w, http.StatusTooManyRequests, api.Error{Error: "too many unknown tokens from this address"})
		return request{}, false
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
	if wait := s.rates.take(tok.ID, rate, max(2*rate, 10), 1, time.Now()); wait > 0 {
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
		if ref.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(ref.retryAfter/time.Second)+1))
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
// api_limit exception on its stream at most once a minute per limit.
func (s *Server) limited(q request, limit, msg string) {
	if s.opt.Limited != nil {
		s.opt.Limited(q.token.Slave, limit)
	}
	s.note(q, limit, events.KindAPILimit, "work API: "+msg+" ("+q.r.URL.Path+")")
}

// note records an exception of kind about the token's slave on its stream,
// at most once a minute per token and key, and logs it likewise.
func (s *Server) note(q request, key, kind, msg string) {
	key = strconv.FormatInt(q.token.ID, 10) + "/" + key
	now := time.Now()
	if last, ok := s.noted.Load(key); ok && now.Sub(last.(time.Time)) < time.Minute {
		return
	}
	s.noted.Store(key, now)
	ev, err := frontier.NewEvent(&events.Exception{Crawl: s.opt.Crawl, Kind: kind, Slave: q.token.Slave,
		Message: msg, At: now.UnixMilli()})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(q.r.Context()), 5*time.Second)
		defer cancel()
		_ = s.opt.Front.PublishAs(ctx, q.token.Slave, []frontier.Event{ev})
	}
	s.opt.RL.Log(q.r.Context(), slog.LevelWarn, "api-note-"+key, "work API: a slave refused",
		"slave", q.token.Slave, "kind", kind, "detail", msg)
}

// splitHostPort splits a host:port whose host is a literal IP.
func splitHostPort(hp string) (netip.Addr, string, error) {
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return netip.Addr{}, "", err
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return netip.Addr{}, "", err
	}
	return ip.Unmap(), p, nil
}

func (s *Server) hello(_ context.Context, q request) (any, error) {
	return api.Hello{Crawl: s.opt.Crawl, Slave: q.token.Slave, Shards: s.opt.Front.NumShards(), Library: s.opt.Library}, nil
}

// decode reads a request's body into v, counting its records as it goes
// (Bounds).
func (s *Server) decode(q request, v any) error {
	return api.DecodeBounded(q.r.Body, s.opt.Limits.MaxBody, v, s.bounds())
}

// Bounds of a request's records besides MaxLinks: what an honest slave's
// largest batch holds (1000 completions, a sitemap's links, the items of
// listing pages), and what a hostile one can make the master hold.
const (
	maxCompletionsPerRequest = 1000
	maxEventsPerRequest      = 100000
	maxLeasesPerRequest      = 10000
)

func (s *Server) bounds() api.Bounds {
	return api.Bounds{Completions: maxCompletionsPerRequest, Links: s.opt.Limits.MaxLinks,
		LinksTotal: 4 * s.opt.Limits.MaxLinks, Events: maxEventsPerRequest, Leases: maxLeasesPerRequest}
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
	s.served.add(q.token.Slave, res.Leases)
	return claimResponse(res), nil
}

func (s *Server) complete(ctx context.Context, q request) (any, error) {
	var c api.CompleteRequest
	if err := s.decode(q, &c); err != nil {
		return nil, refuseDecode(err)
	}
	cs, err := s.completions(ctx, q, c.Completions)
	if err != nil {
		return nil, err
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
		s.served.add(q.token.Slave, res.Leases)
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

// leaseRef is the lease a slave names: its URL, token and shard, checked
// for form (whether the slave holds it is the frontier's to say); its
// Host is refHost's.
func (s *Server) leaseRef(r api.LeaseRef) (frontier.Lease, error) {
	if r.URL == "" || len(r.URL) > urlx.MaxURLLength || r.Shard < 0 || r.Shard >= s.opt.Front.NumShards() {
		return frontier.Lease{}, refuse(http.StatusBadRequest, "lease: URL empty or too long, or no such shard")
	}
	l := frontier.Lease{Token: r.Token, Shard: r.Shard}
	l.URL = r.URL
	return l, nil
}

// refHost is the host key of a lease's URL ("" for one that does not
// parse).
func refHost(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return urlx.HostKey(u)
	}
	return ""
}

func (s *Server) extend(ctx context.Context, q request) (any, error) {
	var e api.ExtendRequest
	if err := s.decode(q, &e); err != nil {
		return nil, refuseDecode(err)
	}
	ls := make([]frontier.Lease, len(e.Leases))
	for i, r := range e.Leases {
		l, err := s.leaseRef(r)
		if err != nil {
			return nil, err
		}
		l.Host = refHost(l.URL)
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
	if hb.MetricsAddr != "" && !sameHost(hb.MetricsAddr, q.r.RemoteAddr) {
		// Prometheus is pointed only at the address the slave's
		// connection comes from (sd.go then applies admin.sd_allow)
		s.invalid(q, "metrics_addr", "heartbeat: metrics_addr "+strconv.Quote(clip(hb.MetricsAddr, 64))+
			" is not on the address the slave connects from ("+addrKey(q.r.RemoteAddr)+"): not listed")
		hb.MetricsAddr = ""
	}
	ctl, err := s.opt.Front.HeartbeatControl(ctx, hb)
	if err != nil {
		return nil, err
	}
	s.beats.record(q.token.Slave, time.Now(), ctl.Finished)
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
	s.served.forget(q.token.Slave)
	s.beats.forget(q.token.Slave)
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
	evs, err := s.slaveEvents(ctx, q, e.Events)
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
	if tm := (*api.TooManyError)(nil); errors.As(err, &tm) {
		return refuse(http.StatusRequestEntityTooLarge, tm.Error())
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
