package dnscache

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

// TestQueryPairOneSocket checks that a lookup sends its A and AAAA queries
// from one socket, and takes each answer by its ID: the server answers
// AAAA first, after a datagram of a stray ID (a late answer or a forgery)
// whose address must not be taken.
func TestQueryPairOneSocket(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	type got struct {
		from  []string
		types []uint16
		err   error
	}
	done := make(chan got, 1)
	go func() {
		var g got
		defer func() { done <- g }()
		pc.SetDeadline(time.Now().Add(10 * time.Second))
		var qs []*dns.Msg
		var from net.Addr
		buf := make([]byte, 1500)
		for len(qs) < 2 {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				g.err = err
				return
			}
			m := new(dns.Msg)
			if g.err = m.Unpack(buf[:n]); g.err != nil {
				return
			}
			qs, from = append(qs, m), addr
			g.from, g.types = append(g.from, addr.String()), append(g.types, m.Question[0].Qtype)
		}
		answer := func(q *dns.Msg, id uint16, ip string) {
			r := new(dns.Msg)
			r.SetReply(q)
			r.Id = id
			hdr := dns.RR_Header{Name: q.Question[0].Name, Class: dns.ClassINET, Ttl: 60, Rrtype: q.Question[0].Qtype}
			if q.Question[0].Qtype == dns.TypeA {
				r.Answer = append(r.Answer, &dns.A{Hdr: hdr, A: net.ParseIP(ip)})
			} else {
				r.Answer = append(r.Answer, &dns.AAAA{Hdr: hdr, AAAA: net.ParseIP(ip)})
			}
			p, err := r.Pack()
			if err == nil {
				_, err = pc.WriteTo(p, from)
			}
			if err != nil && g.err == nil {
				g.err = err
			}
		}
		a, aaaa := qs[0], qs[1]
		if a.Question[0].Qtype != dns.TypeA {
			a, aaaa = aaaa, a
		}
		answer(a, a.Id^aaaa.Id^0x5a5a, "10.6.6.6") // neither query's ID
		answer(aaaa, aaaa.Id, "fd00::7")
		answer(a, a.Id, "127.0.0.7")
	}()

	r := newResolver(t, Options{Server: pc.LocalAddr().String()})
	ips, err := r.LookupIP(context.Background(), "pair.test")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(addrs("127.0.0.7", "fd00::7"), ips, cmpAddr); d != "" {
		t.Errorf("addresses (-want +got):\n%s", d)
	}
	g := <-done
	if g.err != nil {
		t.Fatalf("server: %v", g.err)
	}
	if len(g.from) != 2 || g.from[0] != g.from[1] {
		t.Errorf("queries came from %v, want one socket", g.from)
	}
	if d := cmp.Diff([]uint16{dns.TypeA, dns.TypeAAAA}, g.types); d != "" {
		t.Errorf("query types (-want +got):\n%s", d)
	}
}
