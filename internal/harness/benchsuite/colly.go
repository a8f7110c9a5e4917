package benchsuite

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"
)

// runColly crawls the site with a plain colly collector: asynchronous,
// limited to the site's hosts, HostConcurrency requests in flight per host
// (a LimitRule per host) and Concurrency fetches in all (a semaphore taken
// in OnRequest, given back in OnResponse or OnError, as colly's own limits
// are given back once the body is read), colly's own revisit
// dedup, robots.txt ignored, every a[href] followed.
func (b *bench) runColly(ctx context.Context) (*CollyResult, error) {
	b.site.ResetHits()
	fmt.Fprintf(b.opt.Out, "bench: colly crawl…\n")
	cctx, cancel := context.WithTimeoutCause(ctx, RunTimeout, fmt.Errorf("colly crawl took over %v", RunTimeout))
	defer cancel()

	c := colly.NewCollector(colly.Async(true), colly.AllowedDomains(b.hostIPs...),
		colly.IgnoreRobotsTxt(), colly.StdlibContext(cctx))
	for _, raw := range b.site.HostURLs() {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, err
		}
		if err := c.Limit(&colly.LimitRule{DomainGlob: u.Host, Parallelism: b.opt.HostConcurrency}); err != nil {
			return nil, fmt.Errorf("benchsuite: colly limit: %w", err)
		}
	}
	var expMu sync.Mutex
	var expAt []time.Duration // when each expected URL's response came
	var start time.Time
	pages, errs := collyCrawl(cctx, c, b.opt.Concurrency, func(r *colly.Response) {
		if _, ok := b.expected[r.Request.URL.String()]; ok {
			expMu.Lock()
			expAt = append(expAt, time.Since(start))
			expMu.Unlock()
		}
	})

	rss0 := procStatusKB(0, "VmRSS")
	cpu0 := selfCPU()
	start = time.Now()
	smp := &sampler{start: start, done: func(context.Context) (int64, int64, error) {
		return pages.Load(), 0, nil
	}}
	sctx, stopSampler := context.WithCancel(cctx)
	var swg sync.WaitGroup
	swg.Add(1)
	go func() { defer swg.Done(); smp.run(sctx) }()

	for _, seed := range b.site.Seeds() {
		if err := c.Visit(seed); err != nil {
			stopSampler()
			swg.Wait()
			return nil, fmt.Errorf("benchsuite: colly: %w", err)
		}
	}
	c.Wait()
	elapsed := time.Since(start)
	cpu := selfCPU() - cpu0
	smp.sample(sctx, false) // the last point
	stopSampler()
	swg.Wait()
	if cause := context.Cause(cctx); cause != nil {
		return nil, fmt.Errorf("benchsuite: %w", cause)
	}

	res := &CollyResult{Pages: pages.Load(), Errors: errs.Load(), Seconds: elapsed.Seconds(),
		CPUPer1k: per1k(cpu, pages.Load()), RSSGrowth: -1}
	res.PagesPerSec = float64(res.Pages) / elapsed.Seconds()
	res.To99Seconds, res.PagesPerSec99 = math.NaN(), math.NaN()
	expMu.Lock()
	slices.Sort(expAt)
	res.RampSeconds, res.FirstFetch = ramp(expAt), math.NaN()
	if len(expAt) > 0 {
		res.FirstFetch = expAt[0].Seconds()
	}
	if k := pages99(len(b.expected)); len(expAt) >= k {
		res.To99Seconds = expAt[k-1].Seconds()
		res.PagesPerSec99 = float64(k) / res.To99Seconds
	}
	expMu.Unlock()
	smp.mu.Lock()
	res.Series = smp.series
	if rss0 > 0 && smp.peakRSS > 0 {
		res.RSSGrowth = max(0, smp.peakRSS-rss0)
	}
	smp.mu.Unlock()
	res.Missing, res.Extra = b.exactlyOnce()
	return res, nil
}

// pages99 is how many of n expected pages make 99% of them.
func pages99(n int) int { return max(1, int(math.Ceil(0.99*float64(n)))) }

// collyCrawl sets the callbacks the bench's colly crawls share on c:
// conc fetches in all (a semaphore taken in OnRequest, given back in
// OnResponse or OnError, as colly's own limits are given back once the body
// is read; ctx ending aborts a request waiting for it) and every a[href]
// followed. onResponse, when set, sees each response too. It returns the
// counts of responses and of errors.
func collyCrawl(ctx context.Context, c *colly.Collector, conc int, onResponse func(*colly.Response)) (pages, errs *atomic.Int64) {
	sem := make(chan struct{}, conc)
	var held sync.Map // request ID → holds a slot of sem
	release := func(r *colly.Request) {
		if _, ok := held.LoadAndDelete(r.ID); ok {
			<-sem
		}
	}
	pages, errs = new(atomic.Int64), new(atomic.Int64)
	c.OnRequest(func(r *colly.Request) {
		select {
		case sem <- struct{}{}:
			held.Store(r.ID, true)
		case <-ctx.Done():
			r.Abort()
		}
	})
	c.OnError(func(r *colly.Response, _ error) {
		errs.Add(1)
		release(r.Request)
	})
	c.OnResponse(func(r *colly.Response) {
		pages.Add(1)
		release(r.Request)
		if onResponse != nil {
			onResponse(r)
		}
	})
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		if link := e.Request.AbsoluteURL(e.Attr("href")); link != "" {
			e.Request.Visit(link)
		}
	})
	return pages, errs
}
