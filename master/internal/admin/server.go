// Package admin is the master's HTTP server: a dashboard at /, a JSON API
// under /api/v1/, the master's Prometheus /metrics and Prometheus HTTP
// service discovery of the slaves. It reads and acts through a Backend.
package admin

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/redcrawl/redcrawl/shared/httpserve"
)

// Timeouts of the HTTP server that Serve runs.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 2 * time.Minute
	shutdownTimeout   = 5 * time.Second
	maxHeaderBytes    = 64 << 10
)

// maxLoginClients bounds the clients the login limiter tracks (about
// 100 bytes each).
const maxLoginClients = 4096

// Options configure a Server.
type Options struct {
	// Backend is what the server reads and acts on. Required.
	Backend Backend
	// Token is the admin token (admin.token). Every action needs it, and
	// every read unless PublicRead. Empty refuses everything but public
	// reads.
	Token string
	// PublicRead lets reads (dashboard, GET API, /metrics) through without
	// the token (admin.public_read). Actions still need it.
	PublicRead bool
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Metrics is the master's Prometheus handler, served at /metrics; nil
	// answers 404 there.
	Metrics http.Handler
	// SD lists the Prometheus scrape targets served at /api/v1/sd; nil
	// answers 404 there.
	SD func(ctx context.Context) ([]SDTarget, error)
	// TLS makes Serve speak HTTPS with this configuration (its
	// certificates; TLS 1.2 at least whatever it says); nil = plain HTTP.
	// The login cookie is Secure on a TLS connection.
	TLS *tls.Config
	// Sessions holds the login sessions' state that the masters serving
	// the dashboard share (frontier.Sessions); nil = no login (the
	// Bearer token still works).
	Sessions SessionStore
	// SessionTTL is how long a login lasts (admin.session_ttl); 0 =
	// DefaultSessionTTL.
	SessionTTL time.Duration
}

// SDTarget is one target group in Prometheus HTTP service discovery
// format: {"targets":["host:port"],"labels":{"name":"value"}}.
type SDTarget struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Server is the admin HTTP handler. Create it with New.
type Server struct {
	opt    Options
	log    *slog.Logger
	mux    *http.ServeMux
	pages  *pages
	now    func() time.Time
	errLog logLimiter
	logins loginLimiter
	links  usedLinks
	// sessions is nil without Options.Sessions
	sessions *sessionCache
	ttl      time.Duration
}

// New returns a Server for opt.
func New(opt Options) *Server {
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opt:    opt,
		log:    log,
		mux:    http.NewServeMux(),
		pages:  mustPages(),
		now:    time.Now,
		errLog: logLimiter{max: 10, window: time.Minute},
		logins: loginLimiter{burst: 5, refill: 5 * time.Second, max: maxLoginClients},
		ttl:    opt.SessionTTL,
	}
	if opt.Sessions != nil {
		s.sessions = &sessionCache{store: opt.Sessions}
	}
	if s.ttl <= 0 {
		s.ttl = DefaultSessionTTL
	}
	s.routes()
	return s
}

func (s *Server) routes() {
	s.mux.HandleFunc("/", s.handleRoot)
	s.mux.Handle("/static/", staticHandler())
	s.mux.HandleFunc("/login", s.handleLogin)
	s.mux.HandleFunc("/logout", s.handleLogout)
	s.mux.HandleFunc("/metrics", s.handleMetrics)

	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such API endpoint")
	})
	s.mux.HandleFunc("/api/v1/overview", s.read(s.apiOverview))
	s.mux.HandleFunc("/api/v1/series", s.read(s.apiSeries))
	s.mux.HandleFunc("/api/v1/exceptions", s.read(s.apiExceptions))
	s.mux.HandleFunc("/api/v1/lost", s.read(s.apiLost))
	s.mux.HandleFunc("/api/v1/proxies", s.read(s.apiProxies))
	s.mux.HandleFunc("/api/v1/sd", s.read(s.apiSD))
	s.mux.HandleFunc("/api/v1/actions", s.action(s.apiAction))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; "+
		"img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	s.mux.ServeHTTP(w, r)
}

// Serve serves HTTP (HTTPS with Options.TLS) on ln until ctx is cancelled, then shuts down
// gracefully, waiting at most a few seconds for requests in progress. It
// returns nil after a shutdown caused by ctx, or the error that stopped
// the server otherwise.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.opt.TLS != nil {
		t := s.opt.TLS.Clone()
		t.MinVersion = max(t.MinVersion, tls.VersionTLS12)
		ln = tls.NewListener(ln, t)
	}
	return httpserve.Run(ctx, srv, ln, shutdownTimeout, s.log, "admin server")
}

// logLimiter lets at most max error logs through per window and counts
// the rest, so a failing backend polled by dashboards cannot flood the log.
type logLimiter struct {
	max    int
	window time.Duration

	mu         sync.Mutex
	start      time.Time
	n          int
	suppressed int
}

// allow reports whether to log now, and how many logs were suppressed
// since the last one let through.
func (l *logLimiter) allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.start) >= l.window {
		l.start, l.n = now, 0
	}
	if l.n >= l.max {
		l.suppressed++
		return false, 0
	}
	l.n++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// logError logs a failed request, rate limited.
func (s *Server) logError(r *http.Request, msg string, err error) {
	ok, suppressed := s.errLog.allow(s.now())
	if !ok {
		return
	}
	s.log.Error(msg, "method", r.Method, "path", r.URL.Path, "err", err, "suppressed", suppressed)
}
