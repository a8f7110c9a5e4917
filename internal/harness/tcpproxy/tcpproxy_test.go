package tcpproxy

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestRoundTrip sends data through the proxy to an echo server: it comes
// back whole, in order, and not before the round trip time.
func TestRoundTrip(t *testing.T) {
	defer goleak.VerifyNone(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echoDone := make(chan struct{})
	go func() {
		defer close(echoDone)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	const rtt = 60 * time.Millisecond
	p, err := Start(ln.Addr().String(), rtt)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{1, 1000, 300_000} {
		msg := bytes.Repeat([]byte{byte(size)}, size)
		start := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, size)
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < rtt {
			t.Errorf("%d bytes came back after %v, before the round trip %v", size, took, rtt)
		}
		if !bytes.Equal(got, msg) {
			t.Errorf("%d bytes came back changed", size)
		}
	}
	c.Close()
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	ln.Close()
	<-echoDone
}

// TestCloseEndsConnections: Close ends connections still open, and a dial
// after it is refused.
func TestCloseEndsConnections(t *testing.T) {
	defer goleak.VerifyNone(t)
	ln := serve(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	defer ln.Close()
	p, err := Start(ln.Addr().String(), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("x"))
	p.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a connection read after Close, want it ended")
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		c2.Close()
		t.Error("dial after Close succeeded")
	}
}

// TestSetDown: while down, a new connection is closed at once; brought
// back, the proxy forwards again.
func TestSetDown(t *testing.T) {
	defer goleak.VerifyNone(t)
	ln := serve(t, func(c net.Conn) { io.Copy(c, c) })
	defer ln.Close()
	p, err := Start(ln.Addr().String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	echo := func() error {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		_, err = io.ReadFull(c, make([]byte, 1))
		return err
	}
	p.SetDown(true)
	if err := echo(); err == nil {
		t.Error("a connection was forwarded while down")
	}
	p.SetDown(false)
	if err := echo(); err != nil {
		t.Errorf("after SetDown(false): %v", err)
	}
}

// serve listens on loopback and runs handle for each connection (then
// closes it) until the listener is closed.
func serve(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { handle(c); c.Close() }()
		}
	}()
	return ln
}

// TestSetPartitioned: while partitioned, a connection stays open and what
// is sent is not forwarded; what a client sent and then gave up on (it
// closed the connection) still reaches the server once the partition
// heals, and the proxy forwards both ways again.
func TestSetPartitioned(t *testing.T) {
	defer goleak.VerifyNone(t)
	got := make(chan string, 4)
	ln := serve(t, func(c net.Conn) {
		b, _ := io.ReadAll(c)
		got <- string(b)
	})
	defer ln.Close()
	echoLn := serve(t, func(c net.Conn) { io.Copy(c, c) })
	defer echoLn.Close()
	for _, rtt := range []time.Duration{0, 10 * time.Millisecond} {
		p, err := Start(ln.Addr().String(), rtt)
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte("before ")); err != nil {
			t.Fatal(err)
		}
		p.SetPartitioned(true)
		p.SetPartitioned(true) // twice: still one partition
		late, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatalf("dial while partitioned: %v", err)
		}
		late.Write([]byte("late"))
		late.Close() // the client gives up
		select {
		case s := <-got:
			t.Fatalf("rtt %v: the server got %q while partitioned", rtt, s)
		case <-time.After(100 * time.Millisecond):
		}
		c.Write([]byte("during"))
		c.Close()
		p.SetPartitioned(false)
		want := map[string]bool{"before during": true, "late": true}
		for range 2 {
			select {
			case s := <-got:
				if !want[s] {
					t.Errorf("rtt %v: the server got %q, want one of %v", rtt, s, want)
				}
				delete(want, s)
			case <-time.After(5 * time.Second):
				t.Fatalf("rtt %v: nothing delivered after the partition healed; missing %v", rtt, want)
			}
		}
		p.Close()
	}

	// healed, the proxy answers again
	p, err := Start(echoLn.Addr().String(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.SetPartitioned(true)
	c.Write([]byte("x"))
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read %d bytes through a partition", n)
	}
	p.SetPartitioned(false)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Errorf("after the partition healed: %v", err)
	}
}
