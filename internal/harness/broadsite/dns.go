package broadsite

// The site's DNS server: A records of the site's host names on UDP and
// TCP at one loopback address.

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
)

type dnsServer struct {
	addr    string
	servers []*dns.Server
	wg      sync.WaitGroup
}

// startDNS serves resolve's answers on 127.0.0.1, UDP and TCP on one
// port: an A record (TTL) for a name of the site, an empty answer for its
// other types, NXDOMAIN for any other name.
func startDNS(resolve func(name string) (net.IP, bool), queries *atomic.Int64) (*dnsServer, error) {
	var pc net.PacketConn
	var ln net.Listener
	var err error
	for range 20 {
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			return nil, err
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("a TCP port beside the UDP one: %w", err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(req)
		m.Authoritative = true
		if len(req.Question) != 1 {
			m.Rcode = dns.RcodeFormatError
			_ = w.WriteMsg(m)
			return
		}
		q := req.Question[0]
		ip, ok := resolve(q.Name)
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA,
				Class: dns.ClassINET, Ttl: TTL}, A: ip})
		}
		_ = w.WriteMsg(m)
	})
	d := &dnsServer{addr: pc.LocalAddr().String(),
		servers: []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}}}
	for i, srv := range d.servers {
		started := make(chan struct{})
		failed := make(chan error, 1)
		srv.NotifyStartedFunc = func() { close(started) }
		d.wg.Go(func() {
			if err := srv.ActivateAndServe(); err != nil { // nil once Shutdown closes its socket
				failed <- err
			}
		})
		select {
		case <-started:
		case err := <-failed:
			for _, s := range d.servers[:i] {
				_ = s.Shutdown()
			}
			pc.Close()
			ln.Close()
			d.wg.Wait()
			return nil, err
		}
	}
	return d, nil
}

func (d *dnsServer) close() {
	for _, srv := range d.servers {
		_ = srv.Shutdown()
	}
	d.wg.Wait()
}
