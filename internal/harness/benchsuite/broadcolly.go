package benchsuite

// The nearest peer on the broad bench's work: plain colly crawling the
// same sites, so that the broad / narrow ratio of pages/s can be read
// against what a crawler of one process makes of the same hosts.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/redcrawl/redcrawl/internal/harness/broadsite"
)

// CollyBroadRun is plain colly's crawl of one site of the broad bench.
type CollyBroadRun struct {
	Hosts, PerHost int
	Pages, Errors  int64 // responses (repeats included), errors
	Missing, Extra int   // pages never fetched, fetches beyond one a page
	Seconds        float64
	// PagesPerSec counts the site's pages fetched, once each: colly's
	// asynchronous collector fetches some URLs twice (two goroutines
	// check its visited set before either marks it).
	PagesPerSec float64
	// CPUMsPerPage is this process's CPU a page: colly's, the site's
	// serving and its DNS server's (an upper bound of colly's own).
	CPUMsPerPage float64
}

// runCollyBroad crawls site with a plain colly collector: asynchronous,
// conc fetches in all and every a[href] followed (collyCrawl, as runColly),
// hostConc a host (a LimitRule a host, when the site has at most
// maxCollyHostRules hosts: colly matches its rules one by one for every
// request), its own revisit dedup, from every host's root. Host names are
// resolved by Go's resolver through the site's DNS server, uncached, as
// colly does.
func (b *bench) runCollyBroad(ctx context.Context, site *broadsite.Site, conc, hostConc int) (*CollyBroadRun, error) {
	so := site.Options()
	site.ResetHits()
	fmt.Fprintf(b.opt.Out, "broad: colly, %d hosts × %d pages, %d fetches…\n", so.Hosts, so.PagesPerHost, conc)
	cctx, cancel := context.WithTimeoutCause(ctx, RunTimeout, fmt.Errorf("colly crawl took over %v", RunTimeout))
	defer cancel()

	dns := site.DNSAddr()
	var d net.Dialer
	dialer := &net.Dialer{Timeout: 10 * time.Second, Resolver: &net.Resolver{PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, dns)
		}}}
	tr := &http.Transport{DialContext: dialer.DialContext, MaxIdleConns: 4 * conc, MaxIdleConnsPerHost: hostConc,
		IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()

	c := colly.NewCollector(colly.Async(true), colly.IgnoreRobotsTxt(), colly.StdlibContext(cctx))
	c.WithTransport(tr)
	if so.Hosts <= maxCollyHostRules {
		for i := range so.Hosts {
			glob := site.HostName(i) + ":*" // colly matches the host with its port
			if err := c.Limit(&colly.LimitRule{DomainGlob: glob, Parallelism: hostConc}); err != nil {
				return nil, fmt.Errorf("benchsuite: colly limit: %w", err)
			}
		}
	}
	pages, errs := collyCrawl(cctx, c, conc, nil)

	cpu0 := selfCPU()
	start := time.Now()
	for _, seed := range site.Seeds() {
		// a root the pages fetched meanwhile linked to is visited already
		var visited *colly.AlreadyVisitedError
		if err := c.Visit(seed); err != nil && !errors.As(err, &visited) {
			c.Wait()
			return nil, fmt.Errorf("benchsuite: colly: %w", err)
		}
	}
	c.Wait()
	elapsed := time.Since(start)
	cpu := selfCPU() - cpu0
	if cause := context.Cause(cctx); cause != nil {
		return nil, fmt.Errorf("benchsuite: %w", cause)
	}
	res := &CollyBroadRun{Hosts: so.Hosts, PerHost: so.PagesPerHost, Pages: pages.Load(), Errors: errs.Load(),
		Seconds: elapsed.Seconds()}
	res.Missing, res.Extra, _ = site.Hits()
	distinct := int64(site.ExpectedPages() - res.Missing)
	res.PagesPerSec = float64(distinct) / res.Seconds
	res.CPUMsPerPage = cpu.Seconds() * 1000 / float64(max(1, distinct))
	fmt.Fprintf(b.opt.Out, "broad: colly, %d hosts: %d responses in %.1fs, %.0f pages/s (%d errors, %d missing, %d extra)\n",
		so.Hosts, res.Pages, res.Seconds, res.PagesPerSec, res.Errors, res.Missing, res.Extra)
	return res, nil
}

// maxCollyHostRules is the most hosts colly is given a LimitRule each:
// it matches a request's host against its rules one by one.
const maxCollyHostRules = 1000
