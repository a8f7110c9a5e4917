package testsite

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ProxyHeader is the request header a Proxy adds to every request it
// forwards, holding its Name; the site records it in Hit.Via.
const ProxyHeader = "X-Testsite-Proxy"

// Bounds of a Proxy's work.
const (
	// maxProxies is how many proxies StartProxies starts at most.
	maxProxies = 64
	// proxyMaxDuration bounds a forwarded exchange or a tunnel; it
	// outlasts the site's slowest page.
	proxyMaxDuration = HostileMaxDuration + time.Minute
	// proxyDialTimeout bounds a connection to the site.
	proxyDialTimeout = 10 * time.Second
	// proxyMaxReads bounds the reads of a forwarded body.
	proxyMaxReads = 1 << 22
)

// Proxy is an HTTP forward proxy on its own loopback address, for tests
// of crawling through proxies. It forwards absolute-form requests
// ("GET http://host/path") with its own transport, following no
// redirects, streaming responses back and adding ProxyHeader, and tunnels
// CONNECT requests. It connects to loopback IP addresses only. Its
// methods are safe for concurrent use.
type Proxy struct {
	name string
	addr string // "127.0.0.1:port", kept while down
	tr   *http.Transport
	srv  *http.Server

	mu         sync.Mutex
	ln         net.Listener          // nil while down or closed
	conns      map[net.Conn]struct{} // client connections, hijacked ones included
	requests   int
	status     int
	down       bool
	closed     bool
	user, pass string
	auth       bool

	inflight  sync.WaitGroup // handlers, tunnels included; Add only while !closed
	serving   sync.WaitGroup // Serve loops
	closeOnce sync.Once
}

// StartProxies starts n proxies (1 to 64), named "proxy-0" to
// "proxy-<n-1>", each on its own port of 127.0.0.1. It fails, leaving
// nothing running, if a port can't be bound.
func StartProxies(n int) ([]*Proxy, error) {
	if n < 1 || n > maxProxies {
		return nil, fmt.Errorf("testsite: %d proxies out of range 1..%d", n, maxProxies)
	}
	out := make([]*Proxy, 0, n)
	for i := range n {
		p, err := startProxy("proxy-" + strconv.Itoa(i))
		if err != nil {
			for _, q := range out {
				q.Close()
			}
			return nil, fmt.Errorf("testsite: start proxy %d: %w", i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// startProxy binds and serves one proxy.
func startProxy(name string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{name: name, addr: ln.Addr().String(), ln: ln, conns: make(map[net.Conn]struct{})}
	p.tr = &http.Transport{
		DialContext:         dialLoopback,
		DisableCompression:  true, // pass Accept-Encoding and bodies through untouched
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     time.Minute,
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		ConnState:         p.connState,
	}
	p.serve(ln)
	return p, nil
}

// dialLoopback connects to addr if it is a loopback IP address.
func dialLoopback(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("testsite proxy: %s is not a loopback IP address", host)
	}
	d := net.Dialer{Timeout: proxyDialTimeout}
	return d.DialContext(ctx, network, addr)
}

// serve runs a Serve loop on ln. p.mu must be held, or p not yet shared.
func (p *Proxy) serve(ln net.Listener) {
	p.serving.Add(1)
	go func() {
		defer p.serving.Done()
		// Serve returns when ln is closed, by SetDown or Close.
		_ = p.srv.Serve(ln)
	}()
}

// connState tracks client connections, so SetDown can drop them.
func (p *Proxy) connState(c net.Conn, st http.ConnState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch st {
	case http.StateNew:
		p.conns[c] = struct{}{}
	case http.StateClosed, http.StateHijacked:
		delete(p.conns, c)
	}
}

// Name returns the proxy's name, the value of ProxyHeader it adds.
func (p *Proxy) Name() string { return p.name }

// URL returns the proxy's URL, "http://127.0.0.1:port", for
// http.ProxyURL or a crawler's proxy list.
func (p *Proxy) URL() string { return "http://" + p.addr }

// Requests returns the number of requests the proxy has received,
// whatever it answered them.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests
}

// SetStatus makes the proxy answer every request itself with code, e.g.
// 403 to simulate a ban or 503 an overloaded proxy; 0 makes it forward
// again. It panics if code is neither 0 nor in 100..999.
func (p *Proxy) SetStatus(code int) {
	if code != 0 && (code < 100 || code > 999) {
		panic(fmt.Sprintf("testsite: proxy status %d out of range", code))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = code
}

// RequireAuth makes the proxy answer 407 to requests without a
// "Proxy-Authorization: Basic" header for user and pass.
func (p *Proxy) RequireAuth(user, pass string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user, p.pass, p.auth = user, pass, true
}

// SetDown takes the proxy down, refusing connections (its port is
// closed) and dropping those it has, or brings it back up on the same
// address. Bringing it up fails if the port was taken meanwhile; the
// proxy stays down then. It does nothing after Close.
func (p *Proxy) SetDown(down bool) error {
	p.mu.Lock()
	if p.closed || p.down == down {
		p.mu.Unlock()
		return nil
	}
	if !down {
		defer p.mu.Unlock()
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			return fmt.Errorf("testsite: proxy %s up again: %w", p.name, err)
		}
		p.ln, p.down = ln, false
		p.serve(ln)
		return nil
	}
	ln := p.ln
	p.ln, p.down = nil, true
	conns := p.takeConns()
	p.mu.Unlock()
	ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.tr.CloseIdleConnections()
	return nil
}

// takeConns empties p.conns and returns what it held. p.mu must be held.
func (p *Proxy) takeConns() []net.Conn {
	out := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		out = append(out, c)
		delete(p.conns, c)
	}
	return out
}

// Close stops the proxy: it closes its port and connections, tunnels
// included, and waits for its handlers to return. Calling it again does
// nothing.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		ln := p.ln
		p.ln = nil
		conns := p.takeConns()
		p.mu.Unlock()
		if ln != nil {
			ln.Close()
		}
		p.srv.Close()
		for _, c := range conns {
			c.Close()
		}
		p.serving.Wait()
		p.inflight.Wait()
		p.tr.CloseIdleConnections()
	})
}

// ServeHTTP answers one request to the proxy.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.closed || p.down {
		p.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	p.inflight.Add(1)
	defer p.inflight.Done()
	p.requests++
	status, auth, user, pass := p.status, p.auth, p.user, p.pass
	p.mu.Unlock()

	if status != 0 {
		http.Error(w, fmt.Sprintf("proxy %s answers %d", p.name, status), status)
		return
	}
	if auth {
		u, pw, ok := (&http.Request{Header: http.Header{"Authorization": r.Header.Values("Proxy-Authorization")}}).BasicAuth()
		if !ok || u != user || pw != pass {
			w.Header().Set("Proxy-Authenticate", `Basic realm="testsite"`)
			http.Error(w, "proxy authentication required", http.StatusProxyAuthRequired)
			return
		}
	}
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" {
		http.Error(w, "proxy: want an absolute http URL", http.StatusBadRequest)
		return
	}
	p.forward(w, r)
}

// hopHeaders are the hop-by-hop headers a proxy does not forward.
var hopHeaders = [...]string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHop deletes hop-by-hop headers from h, those Connection names
// included.
func removeHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(textproto.CanonicalMIMEHeaderKey(name))
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// forward sends r on to the site and streams the response back.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), proxyMaxDuration)
	defer cancel()
	out := r.Clone(ctx)
	out.RequestURI = ""
	removeHop(out.Header)
	out.Header.Set(ProxyHeader, p.name)
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	removeHop(resp.Header)
	hdr := w.Header()
	for k, v := range resp.Header {
		hdr[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for range proxyMaxReads { // and at most proxyMaxDuration
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				panic(http.ErrAbortHandler) // the site broke off: so does the proxy
			}
			return
		}
	}
}

// tunnel answers a CONNECT request by relaying bytes between the client
// and the target until either side closes, the proxy goes down or
// proxyMaxDuration passes.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), proxyDialTimeout)
	up, err := dialLoopback(ctx, "tcp", r.Host)
	cancel()
	if err != nil {
		http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		http.Error(w, "proxy: "+err.Error(), http.StatusInternalServerError)
		return
	}
	p.mu.Lock()
	if p.closed || p.down {
		p.mu.Unlock()
		client.Close()
		up.Close()
		return
	}
	p.conns[client], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, client)
		delete(p.conns, up)
		p.mu.Unlock()
		client.Close()
		up.Close()
	}()
	deadline := time.Now().Add(proxyMaxDuration)
	_ = client.SetDeadline(deadline)
	_ = up.SetDeadline(deadline)
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		// Bytes the server read ahead go first.
		_, _ = io.Copy(up, brw.Reader)
		up.Close()
		client.Close()
	})
	_, _ = io.Copy(client, up)
	client.Close()
	up.Close()
	wg.Wait()
}
