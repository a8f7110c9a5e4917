package session

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Test servers, all on 127.0.0.1: a target that records what reached it, an
// HTTP forward proxy and a SOCKS5 server.

// target records, for each request, the proxy that carried it (the
// X-Test-Proxy header the forward proxies add, or "direct") and the remote
// address. Paths: / answers "ok"; /ua echoes the User-Agent; /set?v=X sets
// the cookie sid=X; /get echoes the sid cookie or "none".
type target struct {
	srv   *httptest.Server
	mu    sync.Mutex
	via   []string
	addrs []string
}

func newTarget(t *testing.T) *target {
	t.Helper()
	tg := &target{}
	tg.srv = httptest.NewServer(http.HandlerFunc(tg.serve))
	t.Cleanup(tg.srv.Close)
	return tg
}

func (tg *target) serve(w http.ResponseWriter, r *http.Request) {
	via := r.Header.Get("X-Test-Proxy")
	if via == "" {
		via = "direct"
	}
	tg.mu.Lock()
	tg.via = append(tg.via, via)
	tg.addrs = append(tg.addrs, r.RemoteAddr)
	tg.mu.Unlock()
	switch r.URL.Path {
	case "/ua":
		io.WriteString(w, r.Header.Get("User-Agent"))
	case "/set":
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: r.URL.Query().Get("v"), Path: "/"})
		io.WriteString(w, "set")
	case "/get":
		c, err := r.Cookie("sid")
		if err != nil {
			io.WriteString(w, "none")
			return
		}
		io.WriteString(w, c.Value)
	default:
		io.WriteString(w, "ok")
	}
}

// takeVia returns and forgets the recorded proxies.
func (tg *target) takeVia() []string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	v := tg.via
	tg.via = nil
	return v
}

func (tg *target) remoteAddrs() []string {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return append([]string(nil), tg.addrs...)
}

// Forward proxy modes.
const (
	modeForward int32 = iota
	modeBan           // answers 403 itself
	modeCaptcha       // answers 200 with a captcha page
)

// fwdProxy is an HTTP forward proxy for absolute-form requests to loopback
// targets. With a user it requires Basic Proxy-Authorization.
type fwdProxy struct {
	srv        *httptest.Server
	name       string
	user, pass string
	mode       atomic.Int32
	authFails  atomic.Int32
	tr         *http.Transport
}

func newFwdProxy(t *testing.T, name, user, pass string) *fwdProxy {
	t.Helper()
	fp := &fwdProxy{name: name, user: user, pass: pass, tr: &http.Transport{}}
	fp.srv = httptest.NewServer(http.HandlerFunc(fp.serve))
	t.Cleanup(func() {
		fp.srv.Close()
		fp.tr.CloseIdleConnections()
	})
	return fp
}

// url is the proxy's URL, with its credentials if it has some.
func (fp *fwdProxy) url() string {
	if fp.user == "" {
		return fp.srv.URL
	}
	return strings.Replace(fp.srv.URL, "http://", "http://"+fp.user+":"+fp.pass+"@", 1)
}

func (fp *fwdProxy) serve(w http.ResponseWriter, r *http.Request) {
	if !r.URL.IsAbs() {
		http.Error(w, "absolute-form requests only", http.StatusBadRequest)
		return
	}
	if ip := net.ParseIP(r.URL.Hostname()); ip == nil || !ip.IsLoopback() {
		http.Error(w, "loopback targets only", http.StatusForbidden)
		return
	}
	if fp.user != "" {
		want := "Basic " + base64.StdEncoding.EncodeToString([]byte(fp.user+":"+fp.pass))
		if r.Header.Get("Proxy-Authorization") != want {
			fp.authFails.Add(1)
			w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusProxyAuthRequired)
			return
		}
	}
	switch fp.mode.Load() {
	case modeBan:
		http.Error(w, "banned", http.StatusForbidden)
		return
	case modeCaptcha:
		io.WriteString(w, "<html>Please solve this CAPTCHA</html>")
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Authorization")
	out.Header.Del("Proxy-Connection")
	out.Header.Set("X-Test-Proxy", fp.name)
	res, err := fp.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer res.Body.Close()
	for k, vs := range res.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(res.StatusCode)
	io.Copy(w, res.Body)
}

// socksServer is a minimal SOCKS5 server (RFC 1928, 1929): no auth or
// username/password, CONNECT only, loopback destinations only.
type socksServer struct {
	ln         net.Listener
	user, pass string
	authFails  atomic.Int32
	mu         sync.Mutex
	conns      map[net.Conn]struct{}
	outAddrs   []string // local addresses of the connections to targets
	wg         sync.WaitGroup
}

func newSocks(t *testing.T, user, pass string) *socksServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("socks listen: %v", err)
	}
	s := &socksServer{ln: ln, user: user, pass: pass, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *socksServer) url() string {
	if s.user == "" {
		return "socks5://" + s.ln.Addr().String()
	}
	return "socks5://" + s.user + ":" + s.pass + "@" + s.ln.Addr().String()
}

func (s *socksServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *socksServer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *socksServer) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

func (s *socksServer) targetAddrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.outAddrs...)
}

func (s *socksServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.track(c)
		s.wg.Add(1)
		go s.handle(c)
	}
}

func (s *socksServer) handle(c net.Conn) {
	defer s.wg.Done()
	defer s.untrack(c)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil || hdr[0] != 5 {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, methods); err != nil {
		return
	}
	want := byte(0)
	if s.user != "" {
		want = 2
	}
	if !bytes.Contains(methods, []byte{want}) {
		c.Write([]byte{5, 0xff})
		return
	}
	c.Write([]byte{5, want})
	if want == 2 {
		var ver [2]byte
		if _, err := io.ReadFull(c, ver[:]); err != nil || ver[0] != 1 {
			return
		}
		user := make([]byte, ver[1])
		if _, err := io.ReadFull(c, user); err != nil {
			return
		}
		var plen [1]byte
		if _, err := io.ReadFull(c, plen[:]); err != nil {
			return
		}
		pass := make([]byte, plen[0])
		if _, err := io.ReadFull(c, pass); err != nil {
			return
		}
		if string(user) != s.user || string(pass) != s.pass {
			s.authFails.Add(1)
			c.Write([]byte{1, 1})
			return
		}
		c.Write([]byte{1, 0})
	}
	var req [4]byte
	if _, err := io.ReadFull(c, req[:]); err != nil || req[0] != 5 {
		return
	}
	if req[1] != 1 { // CONNECT only
		c.Write([]byte{5, 7, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	var ip net.IP
	switch req[3] {
	case 1:
		ip = make(net.IP, 4)
	case 4:
		ip = make(net.IP, 16)
	case 3: // a name: only "localhost"
		var l [1]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		name := make([]byte, l[0])
		if _, err := io.ReadFull(c, name); err != nil {
			return
		}
		if string(name) == "localhost" {
			ip = net.IPv4(127, 0, 0, 1)
		}
	default:
		return
	}
	if req[3] != 3 {
		if _, err := io.ReadFull(c, ip); err != nil {
			return
		}
	}
	var port [2]byte
	if _, err := io.ReadFull(c, port[:]); err != nil {
		return
	}
	if ip == nil || !ip.IsLoopback() {
		c.Write([]byte{5, 2, 0, 1, 0, 0, 0, 0, 0, 0}) // not allowed
		return
	}
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(int(binary.BigEndian.Uint16(port[:]))))
	dst, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	s.track(dst)
	defer s.untrack(dst)
	s.mu.Lock()
	s.outAddrs = append(s.outAddrs, dst.LocalAddr().String())
	s.mu.Unlock()
	c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	c.SetDeadline(time.Time{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		io.Copy(dst, c)
		dst.Close()
	}()
	io.Copy(c, dst)
	c.Close()
}

// get sends GET url through s with a caller User-Agent and returns status
// and body.
func get(t *testing.T, s *Session, url string) (int, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header.Set("User-Agent", "caller-ua")
	res, err := s.RoundTripper().RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, string(body), err
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLogger(buf *syncBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// recorder collects events.
type recorder struct {
	mu  sync.Mutex
	evs []Event
	ch  chan Event
}

func newRecorder() *recorder { return &recorder{ch: make(chan Event, 1000)} }

func (r *recorder) on(e Event) {
	r.mu.Lock()
	r.evs = append(r.evs, e)
	r.mu.Unlock()
	select {
	case r.ch <- e:
	default:
	}
}

func (r *recorder) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.evs
	r.evs = nil
	return e
}
