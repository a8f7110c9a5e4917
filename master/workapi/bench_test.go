package workapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/workapi"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/workclient"
)

// BenchmarkCompleteClaim times a slave's steady step, acking the pages it
// fetched and claiming as many in one call, directly on Redis and through
// the work API (HTTPS on loopback, HTTP/1.1 as a slave speaks it and
// HTTP/2, the master's checks and JSON both ways): the difference is the
// latency and the CPU (this process's, client and server) the API adds.
// With links, each ack carries 8 found links (planned by the master for
// the API slave, by the slave itself when direct); batch=20 acks 20 pages
// a call, each with a page record, as a slave of the bench does.
//
//	go test -run '^$' -bench CompleteClaim -benchtime 2000x ./master/workapi/
func BenchmarkCompleteClaim(b *testing.B) {
	for _, c := range []struct{ links, batch int }{{0, 1}, {8, 1}, {8, 20}} {
		for _, kind := range []string{"direct", "api", "api-h2"} {
			name := fmt.Sprintf("%s/links=%d", kind, c.links)
			if c.batch > 1 {
				name += fmt.Sprintf("/batch=%d", c.batch)
			}
			b.Run(name, func(b *testing.B) { benchCompleteClaim(b, kind, c.links, c.batch) })
		}
	}
}

// benchCompleteClaim times b.N steps of a slave holding batch leases:
// each acks them, with links links each and a page record, and claims as
// many again.
func benchCompleteClaim(b *testing.B, kind string, links, batch int) {
	e := newAPIEnvTB(b, workapi.Limits{MaxInFlight: 100, Rate: 1e9, MaxBody: 1 << 20, MaxLinks: 100})
	ctx := context.Background()
	var cc frontier.Frontier = e.front
	if kind != "direct" {
		tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
		opt := workclient.Options{URLs: []string{e.srv.URL}, Token: tok, Crawl: e.crawl, TLS: e.clientTLS()}
		if kind == "api-h2" {
			opt.Transport = e.srv.Client().Transport
		}
		c, err := workclient.New(ctx, opt)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		cc = c
	}
	// a task for every page, over 1,000 hosts
	n := (b.N + 1) * batch
	tasks := make([]frontier.Task, 0, n)
	for i := range n {
		h := fmt.Sprintf("h%d.test", i%1000)
		tasks = append(tasks, frontier.Task{URL: fmt.Sprintf("http://%s/p%d", h, i), Host: h, ScopeHost: h})
	}
	for i := 0; i < len(tasks); i += 5000 {
		if _, err := e.front.Seed(ctx, tasks[i:min(i+5000, len(tasks))]); err != nil {
			b.Fatal(err)
		}
	}
	_, res, err := cc.CompleteClaim(ctx, "pi1", nil, batch, frontier.ClaimOptions{})
	if err != nil || len(res.Leases) != batch {
		b.Fatalf("first claim: %+v %v", res, err)
	}
	leases := res.Leases
	cpu0 := testutil.SelfCPU()
	b.ResetTimer()
	for i := range b.N {
		cs := make([]frontier.Completion, len(leases))
		for k, l := range leases {
			page, _ := frontier.NewEvent(&events.Page{Crawl: e.crawl, URL: l.URL, FinalURL: l.URL, Status: 200,
				ContentType: "text/html; charset=utf-8", Bytes: 15000, Slave: "pi1", Links: links, Charset: "utf-8",
				FetchedAt: time.Now().UnixMilli(), Handler: "html"})
			c := frontier.Completion{Lease: l, Outcome: frontier.Done, Events: []frontier.Event{page}}
			for j := range links {
				x := (i*batch+k)*links + j
				h := fmt.Sprintf("n%d.test", x%5000)
				c.Links = append(c.Links, frontier.Task{URL: fmt.Sprintf("http://%s/l%d", h, x), Host: h, ScopeHost: h, Depth: 1})
			}
			cs[k] = c
		}
		acked, res, err := cc.CompleteClaim(ctx, "pi1", cs, batch, frontier.ClaimOptions{})
		if err != nil || len(acked) != len(cs) || len(res.Leases) != batch {
			b.Fatalf("step %d: acked %v, claim %+v, %v", i, acked, res, err)
		}
		for _, a := range acked {
			if !a {
				b.Fatalf("step %d: acked %v", i, acked)
			}
		}
		leases = res.Leases
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "us/page")
	b.ReportMetric(float64((testutil.SelfCPU()-cpu0).Microseconds())/float64(b.N*batch), "cpu-us/page")
}
