package dnscache

// Queries to Options.Server: A and AAAA over UDP, again over TCP when the
// answer is truncated.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
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

// query sends the A and AAAA queries for name concurrently and combines
// their answers.
func (r *Resolver) query(ctx context.Context, name string) ([]netip.Addr, time.Duration, *net.DNSError) {
	var a, aaaa answer
	var wg sync.WaitGroup
	wg.Go(func() { a = r.exchange(ctx, name, dns.TypeA) })
	aaaa = r.exchange(ctx, name, dns.TypeAAAA)
	wg.Wait()

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

// exchange sends one query, over UDP and, if the answer is truncated, over
// TCP.
func (r *Resolver) exchange(ctx context.Context, name string, qtype uint16) answer {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	m.SetEdns0(1232, false)
	resp, err := r.exchangeNet(ctx, "udp", m)
	if err == nil && resp.Truncated {
		resp, err = r.exchangeNet(ctx, "tcp", m)
	}
	if err != nil {
		return answer{err: err}
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
