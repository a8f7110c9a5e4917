package workapi_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redcrawl/redcrawl/master/workapi"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/slave/workclient"
)

// BenchmarkCompleteClaim times a slave's steady step, acking the page it
// fetched and claiming the next in one call, directly on Redis and through
// the work API (HTTP/2 over TLS on loopback, the master's checks and JSON
// both ways): the difference is the latency the API adds to a claim.
// With links, each ack carries 8 found links (planned by the master for
// the API slave, by the slave itself when direct).
//
//	go test -run '^$' -bench CompleteClaim -benchtime 2000x ./master/workapi/
func BenchmarkCompleteClaim(b *testing.B) {
	for _, links := range []int{0, 8} {
		for _, kind := range []string{"direct", "api"} {
			b.Run(fmt.Sprintf("%s/links=%d", kind, links), func(b *testing.B) {
				e := newAPIEnvTB(b, workapi.Limits{MaxInFlight: 100, Rate: 1e9, MaxBody: 1 << 20, MaxLinks: 100})
				ctx := context.Background()
				var cc frontier.Frontier = e.front
				if kind == "api" {
					tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "pi1"})
					c, err := workclient.New(ctx, workclient.Options{URLs: []string{e.srv.URL}, Token: tok,
						Crawl: e.crawl, Transport: e.srv.Client().Transport})
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					cc = c
				}
				// a task for every step, over 1,000 hosts
				n := b.N + 1
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
				_, res, err := cc.CompleteClaim(ctx, "pi1", nil, 1, frontier.ClaimOptions{})
				if err != nil || len(res.Leases) != 1 {
					b.Fatalf("first claim: %+v %v", res, err)
				}
				lease := res.Leases[0]
				b.ResetTimer()
				for i := range b.N {
					c := frontier.Completion{Lease: lease, Outcome: frontier.Done}
					for j := range links {
						h := fmt.Sprintf("n%d.test", (i*links+j)%5000)
						c.Links = append(c.Links, frontier.Task{URL: fmt.Sprintf("http://%s/l%d", h, i*links+j), Host: h, ScopeHost: h, Depth: 1})
					}
					acked, res, err := cc.CompleteClaim(ctx, "pi1", []frontier.Completion{c}, 1, frontier.ClaimOptions{})
					if err != nil || len(acked) != 1 || !acked[0] || len(res.Leases) != 1 {
						b.Fatalf("step %d: acked %v, claim %+v, %v", i, acked, res, err)
					}
					lease = res.Leases[0]
				}
			})
		}
	}
}
