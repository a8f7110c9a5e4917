package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// dialer dials a Redis node in place of go-redis's own dialer (with
// its keep-alive policy), so that its errors name the address and say
// what to check: a certificate that does not verify, a TLS server dialled
// in clear text.
func dialer(timeout *time.Duration, t *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		to := *timeout
		if to <= 0 {
			to = 5 * time.Second // go-redis's default
		}
		d := &net.Dialer{Timeout: to, KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3,
		}}
		if t == nil {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &plainConn{Conn: conn, addr: addr}, nil
		}
		conn, err := (&tls.Dialer{NetDialer: d, Config: t}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, redisTLSError(addr, err)
		}
		return &tlsConn{Conn: conn, addr: addr}, nil
	}
}

// redisTLSError explains a failed TLS dial.
func redisTLSError(addr string, err error) error {
	var hostErr x509.HostnameError
	var verifyErr *tls.CertificateVerificationError
	var recordErr tls.RecordHeaderError
	var opErr *net.OpError
	switch {
	case errors.As(err, &hostErr):
		return fmt.Errorf("redis %s: TLS certificate verification failed: the certificate is not for this name "+
			"(set redis.tls_server_name to a name it holds): %w", addr, err)
	case errors.As(err, &verifyErr):
		return fmt.Errorf("redis %s: TLS certificate verification failed "+
			"(is redis.tls_ca_file the CA that signed the server's certificate?): %w", addr, err)
	case errors.As(err, &recordErr):
		return fmt.Errorf("redis %s: the server does not speak TLS (is it its plain port? use redis:// or its tls-port): %w", addr, err)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return err // the TCP dial failed: kept as is, go-redis retries it
	}
	return fmt.Errorf("redis %s: TLS handshake failed: %w", addr, err)
}

// hintError puts a hint before an error. Its Unwrap returns a slice so
// that errors.Unwrap, which go-redis applies to a connection's set-up
// error, does not drop the hint, while errors.Is and errors.As still see
// the error (io.EOF stays io.EOF for go-redis's retries).
type hintError struct {
	hint string
	err  error
}

func (e *hintError) Error() string   { return e.hint + ": " + e.err.Error() }
func (e *hintError) Unwrap() []error { return []error{e.err} }

// plainConn is a clear-text connection to Redis. A TLS-only server closes
// it without a word when the first command arrives; plainConn says so
// about a connection closed before its first answer. The error wraps the
// original (io.EOF stays errors.Is io.EOF).
type plainConn struct {
	net.Conn
	addr     string
	answered bool
}

func (c *plainConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.answered = true
	}
	if err != nil && !c.answered && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) {
		err = &hintError{fmt.Sprintf("redis %s closed the connection before answering (is the server TLS-only? use rediss://)", c.addr), err}
	}
	return n, err
}

// SyscallConn lets go-redis's pool check the socket's health as it does
// for its own connections.
func (c *plainConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// NetConn returns the TCP connection.
func (c *plainConn) NetConn() net.Conn { return c.Conn }

// tlsConn is a TLS connection to Redis. With TLS 1.3 a server that
// refuses the client's certificate (or its absence) says so after the
// handshake, on the first read; tlsConn names the address and the keys.
type tlsConn struct {
	net.Conn
	addr     string
	answered bool
}

func (c *tlsConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.answered = true
	}
	var ne net.Error
	if err != nil && !c.answered && !(errors.As(err, &ne) && ne.Timeout()) {
		err = &hintError{fmt.Sprintf("redis %s: the TLS connection failed before the first answer "+
			"(does the server require a client certificate? redis.tls_cert_file, redis.tls_key_file)", c.addr), err}
	}
	return n, err
}

// NetConn returns the *tls.Conn.
func (c *tlsConn) NetConn() net.Conn { return c.Conn }
