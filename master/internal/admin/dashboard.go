package admin

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
)

//go:embed static templates
var assets embed.FS

// pages holds the parsed HTML templates.
type pages struct {
	dashboard *template.Template
	login     *template.Template
}

// mustPages parses the embedded templates; they are part of the binary,
// so failing to parse them is a programming error caught by any test.
func mustPages() *pages {
	funcs := template.FuncMap{
		"domid":      domID,
		"num":        formatInt,
		"rate":       formatRate,
		"when":       formatTime,
		"whenMS":     formatUnixMS,
		"age":        formatAge,
		"mib":        formatMiB,
		"yesno":      yesNo,
		"crawlState": crawlState,
		"slaveState": slaveState,
	}
	parse := func(name string) *template.Template {
		return template.Must(template.New(name).Funcs(funcs).ParseFS(assets, "templates/"+name))
	}
	return &pages{dashboard: parse("dashboard.html"), login: parse("login.html")}
}

// staticHandler serves the embedded JS and CSS.
func staticHandler() http.Handler {
	sub, err := fs.Sub(assets, "static")
	if err != nil {
		panic(fmt.Sprintf("admin: embedded static files: %v", err))
	}
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// dashboardData is what the dashboard template renders.
type dashboardData struct {
	Ov         Overview
	Error      string // the overview could not be read
	CanAct     bool   // the request carries the token
	LoggedIn   bool   // by the login cookie: offer to log out
	PublicRead bool
	Kinds      []string // exception kinds, for the filter's suggestions
}

// loginData is what the login template renders.
type loginData struct {
	Message  string
	Disabled bool   // no token configured: the form cannot succeed
	Lifetime string // how long a login lasts: "12 hours"
}

// lifetime says d in words: "12 hours", "90 minutes".
func lifetime(d time.Duration) string {
	n, unit := int64(d/time.Second), "second"
	switch {
	case d%time.Hour == 0:
		n, unit = int64(d/time.Hour), "hour"
	case d%time.Minute == 0:
		n, unit = int64(d/time.Minute), "minute"
	}
	if n != 1 {
		unit += "s"
	}
	return strconv.FormatInt(n, 10) + " " + unit
}

// handleRoot serves the dashboard at / and 404 for other unknown paths.
func (s *Server) handleRoot(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	cred := s.authenticate(r)
	if !s.opt.PublicRead {
		if s.opt.Token == "" {
			s.renderLogin(w, r, http.StatusUnauthorized, msgReadNoToken+".")
			return
		}
		if cred == credNone {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
	}
	d := dashboardData{
		CanAct:     cred != credNone,
		LoggedIn:   cred == credCookie,
		PublicRead: s.opt.PublicRead,
		Kinds:      exceptionKinds(),
	}
	ov, err := s.opt.Backend.Overview(r.Context())
	if err != nil {
		s.logError(r, "admin dashboard: overview failed", err)
		d.Error = "Could not read the overview: " + msgInternal + ". The page retries by itself."
	}
	d.Ov = normalizeOverview(ov)
	s.render(w, r, s.pages.dashboard, http.StatusOK, d)
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, r, s.pages.login, status, loginData{Message: msg, Disabled: s.opt.Token == "", Lifetime: lifetime(s.ttl)})
}

// render executes t into a buffer first, so a template error becomes a
// clean 500 rather than half a page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, t *template.Template, status int, data any) {
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		s.logError(r, "admin page failed", fmt.Errorf("render %s: %w", t.Name(), err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// handleMetrics serves the master's Prometheus handler, as a read.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	s.read(func(w http.ResponseWriter, r *http.Request) {
		if s.opt.Metrics == nil {
			writeError(w, http.StatusNotFound, "metrics are not enabled")
			return
		}
		s.opt.Metrics.ServeHTTP(w, r)
	})(w, r)
}

// exceptionKinds lists the exception kinds the filter suggests.
func exceptionKinds() []string {
	return []string{
		events.KindDNS, events.KindConnect, events.KindTimeout, events.KindTLS,
		events.KindHTTPStatus, events.KindTooLarge, events.KindRobotsDenied,
		events.KindParse, events.KindRedirect, events.KindBlocked, events.KindFailed,
		events.KindTrap, events.KindProxy, events.KindCharset, events.KindExtract,
		events.KindRules, events.KindHook, events.KindItemPipeline, events.KindRender, events.KindRenderTimeout,
		events.KindRenderCrash, events.KindRenderNavigation, events.KindSitemap, events.KindForgedEvent, events.KindAPILimit,
		events.KindInvalidInput, events.KindOther,
	}
}

// The formatters below have twins in static/dashboard.js, which redraws
// what the template drew first; keep them in step.

// domID makes a name safe inside an element id and a CSS id selector:
// every character but ASCII letters, digits, '-' and '_' becomes '_'.
func domID(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, name)
}

// formatInt groups thousands with commas: 1234567 → "1,234,567".
func formatInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func formatRate(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

// formatTime is a UTC time to the second, "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05") + "Z"
}

func formatUnixMS(ms int64) string {
	if ms == 0 {
		return ""
	}
	return formatTime(time.UnixMilli(ms))
}

// formatAge is how long before now t was, in whole seconds.
func formatAge(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := max(now.Sub(t).Round(time.Second), 0)
	return strconv.FormatInt(int64(d/time.Second), 10) + " s"
}

func formatMiB(bytes int64) string {
	return strconv.FormatFloat(float64(bytes)/(1<<20), 'f', 1, 64)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// crawlState is "paused", "finished" or "running".
func crawlState(c CrawlView) string {
	switch {
	case c.Paused:
		return "paused"
	case c.Finished:
		return "finished"
	case c.Retry > 0 && c.Queued == 0 && c.InFlight == 0:
		return "retrying" // only tasks waiting for their retry backoff are left
	}
	return "running"
}

// slaveState is "dead", "draining" or "running".
func slaveState(v SlaveView) string {
	switch {
	case !v.Alive:
		return "dead"
	case v.Draining || v.State == "draining":
		return "draining"
	}
	return "running"
}
