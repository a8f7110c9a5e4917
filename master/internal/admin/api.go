package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/secret"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// Limits of the API's parameters.
const (
	maxSpan       = 24 * time.Hour
	minStep       = time.Second
	maxPoints     = 2000
	defaultSpan   = time.Hour
	defaultStep   = 10 * time.Second
	defaultLimit  = 50
	maxLimit      = 1000
	maxActionBody = 1 << 20
	maxSeedURLs   = 10000
)

// msgInternal answers a backend failure; the error itself goes to the log.
const msgInternal = "internal error (see the master's log)"

// actionKindList names the kinds POST /api/v1/actions accepts.
const actionKindList = ActPause + ", " + ActResume + ", " + ActSeed + ", " + ActRequeue + ", " + ActDrain + ", " + ActRetireProxy

// errorBody is every API error response.
type errorBody struct {
	Error string `json:"error"`
}

// paramError is a bad query parameter; the message names it.
type paramError struct {
	name string
	msg  string
}

func (e *paramError) Error() string { return e.name + ": " + e.msg }

func badParam(name, format string, args ...any) error {
	return &paramError{name: name, msg: fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Error: msg})
}

// read wraps a GET API handler with the method check and read auth.
func (s *Server) read(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method not allowed: use GET")
			return
		}
		if s.readAllowed(w, r) {
			h(w, r)
		}
	}
}

// action wraps a POST API handler with the method check and action auth.
func (s *Server) action(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			writeError(w, http.StatusMethodNotAllowed, "method not allowed: use POST")
			return
		}
		if s.actionAllowed(w, r) {
			h(w, r)
		}
	}
}

// backendFailed answers a backend error with 500 and logs it.
func (s *Server) backendFailed(w http.ResponseWriter, r *http.Request, err error) {
	s.logError(r, "admin request failed", err)
	writeError(w, http.StatusInternalServerError, msgInternal)
}

func (s *Server) apiOverview(w http.ResponseWriter, r *http.Request) {
	ov, err := s.opt.Backend.Overview(r.Context())
	if err != nil {
		s.backendFailed(w, r, fmt.Errorf("overview: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, normalizeOverview(ov))
}

// normalizeOverview turns nil lists into empty ones so clients get [].
func normalizeOverview(ov Overview) Overview {
	if ov.Crawls == nil {
		ov.Crawls = []CrawlView{}
	}
	if ov.Slaves == nil {
		ov.Slaves = []SlaveView{}
	}
	for i := range ov.Crawls {
		if ov.Crawls[i].Schedules == nil {
			ov.Crawls[i].Schedules = []ScheduleView{}
		}
	}
	return ov
}

func (s *Server) apiSeries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	span, step, err := seriesParams(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	crawl := q.Get("crawl")
	pts, err := s.opt.Backend.Series(r.Context(), crawl, span, step)
	if err != nil {
		s.backendFailed(w, r, fmt.Errorf("series of crawl %q: %w", crawl, err))
		return
	}
	if pts == nil {
		pts = []Point{}
	}
	writeJSON(w, http.StatusOK, pts)
}

// seriesParams validates span and step: span at most a day, step at least
// a second and at most span, and at most maxPoints buckets.
func seriesParams(q url.Values) (span, step time.Duration, err error) {
	span, err = durationParam(q, "span", defaultSpan)
	if err != nil {
		return 0, 0, err
	}
	step, err = durationParam(q, "step", defaultStep)
	if err != nil {
		return 0, 0, err
	}
	switch {
	case span <= 0 || span > maxSpan:
		return 0, 0, badParam("span", "must be more than 0 and at most %s", maxSpan)
	case step < minStep:
		return 0, 0, badParam("step", "must be at least %s", minStep)
	case step > span:
		return 0, 0, badParam("step", "must be at most span (%s)", span)
	}
	if n := (span + step - 1) / step; n > maxPoints {
		return 0, 0, badParam("step", "span/step gives %d points, at most %d allowed", n, maxPoints)
	}
	return span, step, nil
}

func durationParam(q url.Values, name string, def time.Duration) (time.Duration, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, badParam(name, "not a duration like 1h or 10s: %q", v)
	}
	return d, nil
}

// pageParams reads limit (default 50, 1..1000) and offset (0 or more).
func pageParams(q url.Values) (limit, offset int, err error) {
	limit, offset = defaultLimit, 0
	if v := q.Get("limit"); v != "" {
		limit, err = strconv.Atoi(v)
		if err != nil || limit < 1 || limit > maxLimit {
			return 0, 0, badParam("limit", "must be a whole number from 1 to %d", maxLimit)
		}
	}
	if v := q.Get("offset"); v != "" {
		offset, err = strconv.Atoi(v)
		if err != nil || offset < 0 {
			return 0, 0, badParam("offset", "must be a whole number, 0 or more")
		}
	}
	return limit, offset, nil
}

// timeParam reads an RFC 3339 time, or a duration meaning that long
// before now ("1h" = an hour ago). Empty is the zero time.
func timeParam(q url.Values, name string, now time.Time) (time.Time, error) {
	v := strings.TrimSpace(q.Get(name))
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, badParam(name, "want an RFC 3339 time (2006-01-02T15:04:05Z) or a duration ago (1h, 30m): %q", v)
	}
	return now.Add(-d), nil
}

func (s *Server) apiExceptions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	eq, err := exceptionQuery(q, s.now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	page, err := s.opt.Backend.Exceptions(r.Context(), eq)
	if err != nil {
		s.backendFailed(w, r, fmt.Errorf("exceptions: %w", err))
		return
	}
	if page.Items == nil {
		page.Items = []events.Exception{}
	}
	writeJSON(w, http.StatusOK, page)
}

func exceptionQuery(q url.Values, now time.Time) (ExceptionQuery, error) {
	eq := ExceptionQuery{
		Crawl: q.Get("crawl"),
		Kind:  q.Get("kind"),
		Host:  q.Get("host"),
		Slave: q.Get("slave"),
	}
	var err error
	if eq.Since, err = timeParam(q, "since", now); err != nil {
		return eq, err
	}
	if eq.Until, err = timeParam(q, "until", now); err != nil {
		return eq, err
	}
	if !eq.Since.IsZero() && !eq.Until.IsZero() && eq.Until.Before(eq.Since) {
		return eq, badParam("until", "is before since")
	}
	eq.Limit, eq.Offset, err = pageParams(q)
	return eq, err
}

func (s *Server) apiLost(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, offset, err := pageParams(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	crawl := q.Get("crawl")
	lost, err := s.opt.Backend.Lost(r.Context(), crawl, limit, offset)
	if err != nil {
		s.backendFailed(w, r, fmt.Errorf("lost tasks of crawl %q: %w", crawl, err))
		return
	}
	if lost == nil {
		lost = []events.Lost{}
	}
	writeJSON(w, http.StatusOK, lost)
}

func (s *Server) apiProxies(w http.ResponseWriter, r *http.Request) {
	crawl := r.URL.Query().Get("crawl")
	ps, err := s.opt.Backend.Proxies(r.Context(), crawl)
	if err != nil {
		s.backendFailed(w, r, fmt.Errorf("proxies of crawl %q: %w", crawl, err))
		return
	}
	if ps == nil {
		ps = []ProxyHealth{}
	}
	writeJSON(w, http.StatusOK, ps)
}

func (s *Server) apiSD(w http.ResponseWriter, r *http.Request) {
	if s.opt.SD == nil {
		writeError(w, http.StatusNotFound, "service discovery is not enabled")
		return
	}
	ts, err := s.opt.SD(r.Context())
	if err != nil {
		s.backendFailed(w, r, fmt.Errorf("service discovery: %w", err))
		return
	}
	if ts == nil {
		ts = []SDTarget{}
	}
	writeJSON(w, http.StatusOK, ts)
}

func (s *Server) apiAction(w http.ResponseWriter, r *http.Request) {
	a, err := decodeAction(http.MaxBytesReader(w, r.Body, maxActionBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("action body larger than %d bytes", tooBig.Limit))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// Proxies are named by their redacted URL; one given with its
	// password is redacted too, so the password is neither logged nor
	// stored in Redis.
	a.Proxy = secret.URL(a.Proxy)
	log := s.log.With("kind", a.Kind, "crawl", a.Crawl, "slave", a.Slave, "proxy", a.Proxy,
		"urls", len(a.URLs), "remote", r.RemoteAddr)
	res, err := s.opt.Backend.Act(r.Context(), a)
	switch {
	case errors.Is(err, ErrBadAction):
		log.Info("admin action refused", "err", err)
		writeError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		s.backendFailed(w, r, fmt.Errorf("action %s: %w", a.Kind, err))
		return
	}
	log.Info("admin action", "ok", res.OK, "count", res.Count)
	writeJSON(w, http.StatusOK, res)
}

// decodeAction reads and checks an Action: a known kind and the fields it
// needs.
func decodeAction(body io.Reader) (Action, error) {
	var a Action
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return a, fmt.Errorf("malformed action: %w", err)
	}
	if dec.More() {
		return a, errors.New("malformed action: more than one JSON value")
	}
	need := func(field, v string) error {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("action %s needs %s", a.Kind, field)
		}
		return nil
	}
	switch a.Kind {
	case ActPause, ActResume, ActRequeue:
		return a, need("crawl", a.Crawl)
	case ActSeed:
		if err := need("crawl", a.Crawl); err != nil {
			return a, err
		}
		if len(a.URLs) == 0 {
			return a, errors.New("action seed needs urls")
		}
		if len(a.URLs) > maxSeedURLs {
			return a, fmt.Errorf("action seed: %d urls, at most %d in one action", len(a.URLs), maxSeedURLs)
		}
		canon, err := urlx.NewCanonicalizer(nil)
		if err != nil {
			return a, fmt.Errorf("action seed: %w", err)
		}
		for i, raw := range a.URLs {
			if err := checkSeedURL(canon, raw); err != nil {
				return a, fmt.Errorf("action seed: urls[%d]: %w", i, err)
			}
		}
	case ActDrain:
		return a, need("slave", a.Slave)
	case ActRetireProxy:
		if err := need("crawl", a.Crawl); err != nil {
			return a, err
		}
		return a, need("proxy", a.Proxy)
	default:
		return a, fmt.Errorf("unknown action kind %q (want one of %s)", a.Kind, actionKindList)
	}
	return a, nil
}

// checkSeedURL accepts what the master can seed: an absolute http or https
// URL that canonicalizes (a host, at most urlx.MaxURLLength bytes, no
// control characters). The backend scopes what passes.
func checkSeedURL(canon *urlx.Canonicalizer, raw string) error {
	if len(raw) > urlx.MaxURLLength {
		return fmt.Errorf("longer than %d bytes", urlx.MaxURLLength)
	}
	if _, err := canon.Canonicalize(strings.TrimSpace(raw)); err != nil {
		return fmt.Errorf("%q: %w", raw, err)
	}
	return nil
}
