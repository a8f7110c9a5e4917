package dnscache

// Queries to Options.Server: A and AAAA over UDP, again over TCP when the
// answer is truncated.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// answer is the outcome of one query.
type answer struct {
	addrs []netip.Addr
	ttl   uint32 // smallest TTL of the answer records
	rcode int
	err   error // transport error; rcode is meaningless then
}

// query sends the A and AAAA queries for name, both on one UDP socket,
// and combines their answers.
func (r *Resolver) query(ctx context.Context, name string) ([]netip.Addr, time.Duration, *net.DNSError) {
	a, aaaa := r.exchangePair(ctx, name)

	if len(a.addrs)+len(aaaa.addrs) > 0 {
		ttl := uint32(1<<32 - 1)
		for _, x := range []answer{a, aaaa} {
			if len(x.addrs) > 0 {
				ttl = min(ttl, x.ttl)
			}
		}
		return dedup(append(a.addrs, aaaa.addrs...)), time.Duration(ttl) * time.Second, nil
	}
	de := &net.DNSError{Name: name, Server: r.opt.Server}
	switch {
	case (a.err == nil && a.rcode == dns.RcodeNameError) || (aaaa.err == nil && aaaa.rcode == dns.RcodeNameError),
		a.err == nil && aaaa.err == nil && a.rcode == dns.RcodeSuccess && aaaa.rcode == dns.RcodeSuccess:
		de.Err, de.IsNotFound = "no such host", true
	case isTimeout(a.err) || isTimeout(aaaa.err):
		de.Err, de.IsTimeout, de.IsTemporary = "i/o timeout", true, true
		de.UnwrapErr = context.DeadlineExceeded
	case a.err != nil:
		de.Err, de.IsTemporary, de.UnwrapErr = a.err.Error(), true, a.err
	case aaaa.err != nil:
		de.Err, de.IsTemporary, de.UnwrapErr = aaaa.err.Error(), true, aaaa.err
	default:
		rc := a.rcode
		if rc == dns.RcodeSuccess {
			rc = aaaa.rcode
		}
		de.Err, de.IsTemporary = "server misbehaving: "+dns.RcodeToString[rc], true
	}
	return nil, 0, de
}

func isTimeout(err error) bool {
	var ne net.Error
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout())
}

// exchangePair sends the A and AAAA queries for name on one UDP socket,
// as the C library's resolver does (one socket, one random source port, a
// lookup instead of two: a broad crawl resolves every host it meets), and
// reads both answers, told apart by their IDs; an answer that is truncated
// is asked again over TCP, on its own.
func (r *Resolver) exchangePair(ctx context.Context, name string) (a, aaaa answer) {
	ma, maaaa := newQuery(name, dns.TypeA), newQuery(name, dns.TypeAAAA)
	for maaaa.Id == ma.Id {
		maaaa.Id = dns.Id()
	}
	ra, raaaa, err := r.exchangeUDP(ctx, ma, maaaa)
	if err != nil {
		return answer{err: err}, answer{err: err}
	}
	return r.finish(ctx, ma, ra), r.finish(ctx, maaaa, raaaa)
}

// newQuery is the query for name's records of type qtype.
func newQuery(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, false)
	return m
}

// finish makes the answer of query m from its UDP response resp, asking
// again over TCP when resp is truncated.
func (r *Resolver) finish(ctx context.Context, m, resp *dns.Msg) answer {
	if resp.Truncated {
		var err error
		if resp, err = r.exchangeNet(ctx, "tcp", m); err != nil {
			return answer{err: err}
		}
	}
	ans := answer{rcode: resp.Rcode, ttl: 1<<32 - 1}
	if resp.Rcode != dns.RcodeSuccess {
		return ans
	}
	for _, rr := range resp.Answer {
		var ip netip.Addr
		switch rr := rr.(type) {
		case *dns.A:
			ip, _ = netip.AddrFromSlice(rr.A.To4())
		case *dns.AAAA:
			ip, _ = netip.AddrFromSlice(rr.AAAA.To16())
		case *dns.CNAME:
			ans.ttl = min(ans.ttl, rr.Hdr.Ttl)
			continue
		default:
			continue
		}
		if ip.IsValid() {
			ans.addrs = append(ans.addrs, ip)
			ans.ttl = min(ans.ttl, rr.Header().Ttl)
		}
	}
	return ans
}

// exchangeUDP sends queries m1 and m2 (different IDs) on one UDP socket
// and returns their responses; a datagram whose ID is neither (an answer
// to an earlier query that timed out, or a forgery) is skipped. Ending ctx
// closes the socket; its deadline, else Options.Timeout, bounds the reads.
func (r *Resolver) exchangeUDP(ctx context.Context, m1, m2 *dns.Msg) (*dns.Msg, *dns.Msg, error) {
	client := &dns.Client{Net: "udp", Timeout: r.opt.Timeout}
	co, err := client.DialContext(ctx, r.opt.Server)
	if err != nil {
		return nil, nil, fmt.Errorf("dial udp %s: %w", r.opt.Server, err)
	}
	defer co.Close()
	stop := context.AfterFunc(ctx, func() { co.Close() })
	defer stop()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(r.opt.Timeout)
	}
	co.SetDeadline(deadline)
	co.UDPSize = 1232
	fail := func(err error) (*dns.Msg, *dns.Msg, error) {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, nil, fmt.Errorf("exchange over udp: %w", err)
	}
	for _, m := range []*dns.Msg{m1, m2} {
		if err := co.WriteMsg(m); err != nil {
			return fail(err)
		}
	}
	var r1, r2 *dns.Msg
	// bounded: every read waits on the deadline at most
	for r1 == nil || r2 == nil {
		resp, err := co.ReadMsg()
		if err != nil {
			return fail(err)
		}
		switch {
		case resp.Id == m1.Id && r1 == nil:
			r1 = resp
		case resp.Id == m2.Id && r2 == nil:
			r2 = resp
		}
	}
	return r1, r2, nil
}

// exchangeNet sends m over network; ending ctx closes the connection, so
// Close interrupts a query to a stuck server (miekg/dns only honours the
// context's deadline).
func (r *Resolver) exchangeNet(ctx context.Context, network string, m *dns.Msg) (*dns.Msg, error) {
	client := &dns.Client{Net: network, Timeout: r.opt.Timeout}
	co, err := client.DialContext(ctx, r.opt.Server)
	if err != nil {
		return nil, fmt.Errorf("dial %s %s: %w", network, r.opt.Server, err)
	}
	defer co.Close()
	stop := context.AfterFunc(ctx, func() { co.Close() })
	defer stop()
	resp, _, err := client.ExchangeWithConnContext(ctx, m, co)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("exchange over %s: %w", network, ctx.Err())
		}
		return nil, fmt.Errorf("exchange over %s: %w", network, err)
	}
	return resp, nil
}
