// Package demo is the crawl of `make demo` (bin/demo,
// internal/harness/cmd/demo): it serves the synthetic site of
// internal/harness/testsite on loopback addresses, crawls it with a
// master in this process and slaves as processes of the slave binary,
// against the configured Redis and MySQL, and prints what the site saw
// and what landed in MySQL.
package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/sitecrawl"
	"github.com/redcrawl/redcrawl/master/slaveproc"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
)

// Options size the demo crawl.
type Options struct {
	Hosts        int
	PagesPerHost int
	Slaves       int
	SlaveBinary  string // the slave binary its slaves are processes of
	Logger       *slog.Logger
	Out          io.Writer // the summary
	SlaveOutput  io.Writer // the slaves' logs; nil = discarded
	// Keep keeps what the demo created: its crawl's Redis keys and MySQL
	// rows and its WARC directory; else they are removed at the end.
	Keep bool
}

// Run serves a synthetic site on loopback addresses, crawls it with a
// master in this process and slaves as processes of opt.SlaveBinary
// against the configured Redis and MySQL, and prints a summary: coverage,
// exactly-once, politeness as the site saw it, and what landed in MySQL.
func Run(ctx context.Context, base *config.Config, opt Options) error {
	site, err := testsite.Start(testsite.Options{Hosts: opt.Hosts, PagesPerHost: opt.PagesPerHost,
		Robots: true, Specials: true, Hostile: true, Dynamic: opt.Hosts >= 2, Seed: 1})
	if err != nil {
		return fmt.Errorf("start demo site: %w", err)
	}
	defer site.Close()

	cfg := *base
	cfg.Crawl.Name = fmt.Sprintf("demo-%d", time.Now().Unix())
	cfg.Crawl.AllowHosts = nil
	for _, raw := range site.HostURLs() { // the seed is on one host; the scope takes in all
		if u, err := url.Parse(raw); err == nil {
			cfg.Crawl.AllowHosts = append(cfg.Crawl.AllowHosts, u.Hostname())
		}
	}
	cfg.Fetch.AllowPrivateNetworks = true // the demo site is on 127.0.0.x
	// no dashboard: it could collide with a master already on admin.listen
	cfg.Admin.Listen = ""
	if cfg.Politeness.Delay > 200*time.Millisecond {
		cfg.Politeness.Delay = 100 * time.Millisecond
	}
	cfg.Lease.RetryBase = min(cfg.Lease.RetryBase, 500*time.Millisecond)
	// the hostile pages (slow, stalled, calendar and query traps) are
	// bounded by the deadline and the trap caps; keep them short here
	cfg.Fetch.Timeout = min(cfg.Fetch.Timeout, 3*time.Second)
	cfg.Fetch.MaxBodyBytes = min(cfg.Fetch.MaxBodyBytes, 4<<20)
	if cap := int64(opt.PagesPerHost + 100); cfg.Crawl.MaxPagesPerHost == 0 || cfg.Crawl.MaxPagesPerHost > cap {
		cfg.Crawl.MaxPagesPerHost = cap
	}
	if cfg.Crawl.MaxQueryVariants == 0 || cfg.Crawl.MaxQueryVariants > 10 {
		cfg.Crawl.MaxQueryVariants = 10
	}
	rendering := ""
	if shop := site.Shop(); shop.Catalogue != "" {
		if _, err := os.Stat(cfg.Render.ChromePath); err == nil && cfg.Render.Enabled {
			dir, err := os.MkdirTemp("", "redcrawl-demo-rules-")
			if err != nil {
				return fmt.Errorf("demo rules dir: %w", err)
			}
			defer os.RemoveAll(dir)
			u, _ := url.Parse(shop.Catalogue)
			if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(strings.ReplaceAll(demoShopRules, "HOST", u.Hostname())), 0o644); err != nil {
				return fmt.Errorf("demo rules: %w", err)
			}
			cfg.Rules.Dir, cfg.Rules.Poll = dir, 500*time.Millisecond
			rendering = fmt.Sprintf("rendering the shop at %s in headless Chromium (rule file %s)", shop.Catalogue, filepath.Join(dir, "shop.yaml"))
		} else {
			cfg.Rules.Dir = ""
			rendering = "rendering off: no Chromium at " + cfg.Render.ChromePath + " (apt-get install chromium)"
		}
	}
	warcDir := "" // the demo's own, removed with the crawl
	if cfg.Storage.WARCDir == "" {
		dir, err := os.MkdirTemp("", "redcrawl-demo-warc-")
		if err != nil {
			return fmt.Errorf("demo warc dir: %w", err)
		}
		cfg.Storage.WARCDir, warcDir = dir, dir
	}
	if err := cfg.Validate(); err != nil {
		if warcDir != "" {
			os.RemoveAll(warcDir)
		}
		return err
	}
	defer func() {
		if opt.Keep {
			fmt.Fprintf(opt.Out, "demo: kept crawl %s: its Redis keys, MySQL rows and WARC files (%s)\n", cfg.Crawl.Name, cfg.Storage.WARCDir)
			return
		}
		// the crawl's keys, rows and WARC files: a demo leaves nothing behind
		if err := cleanUp(context.WithoutCancel(ctx), &cfg, warcDir, opt.Out); err != nil {
			fmt.Fprintf(opt.Out, "demo: clean-up incomplete: %v\n", err)
		}
	}()
	fmt.Fprintf(opt.Out, "demo: %d hosts × %d pages on %s…, crawl %q, %d slaves, politeness delay %v\n",
		opt.Hosts, opt.PagesPerHost, site.HostURLs()[0], cfg.Crawl.Name, opt.Slaves, cfg.Politeness.Delay)
	if rendering != "" {
		fmt.Fprintf(opt.Out, "demo: %s\n", rendering)
	}

	ids := make([]string, opt.Slaves)
	for i := range ids {
		ids[i] = fmt.Sprintf("demo-slave-%d", i+1)
	}
	var start time.Time
	run, err := sitecrawl.StartLocal(ctx, sitecrawl.LocalOptions{Config: &cfg, Seeds: site.Seeds(),
		Seeded:   func(masterd.SeedResult) error { start = time.Now(); return nil },
		Master:   masterd.Options{Logger: opt.Logger, ProgressEvery: 2 * time.Second},
		SlaveIDs: ids,
		Slaves: slaveproc.Options{Binary: opt.SlaveBinary, Output: opt.SlaveOutput,
			StopTimeout: cfg.Slave.ShutdownTimeout + 5*time.Second}})
	if err != nil {
		return err
	}
	defer run.Stop()
	<-run.Done()
	elapsed := time.Since(start)
	run.StopSlaves()
	if err := run.Wait(); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return summary(ctx, &cfg, site, elapsed, opt.Out)
}

// demoShopRules is the demo's rule file for the test site's shop: the
// catalogue and product pages are rendered, products carry an item.
const demoShopRules = `name: demo-shop
hosts: [HOST]
render:
  - match: ['/shop/$']
    wait_selector: a.product
    click: {selector: button.more, times: 5}
    block: [image, font, media]
  - match: ['/shop/product/\d+$']
    wait_selector: '#price:not(:empty)'
    block: [image, font, media]
items:
  - name: product
    match: ['/shop/product/\d+$']
    fields:
      - {name: title, css: h1, required: true}
      - {name: sku, css: 'meta[itemprop=sku]', attr: content}
      - {name: price, css: '#price', transform: [number], type: number}
      - {name: availability, json: '$.offers.availability'}
      - {name: images, css: img.gallery, attr: src, list: true, type: url}
`

// browserRequest tells the requests a rendering browser makes by itself
// (the page's scripts, its favicon) from the crawler's own.
func browserRequest(pathOrURL string) bool {
	return strings.Contains(pathOrURL, "/shop/api/") || strings.Contains(pathOrURL, "/shop/img/") ||
		strings.HasSuffix(pathOrURL, "/favicon.ico")
}

// summary prints what the site saw and what landed in MySQL; an error when
// the crawl missed expected pages or fetched disallowed ones.
func summary(ctx context.Context, cfg *config.Config, site *testsite.Site, elapsed time.Duration, out io.Writer) error {
	st, err := masterd.Status(ctx, cfg)
	if err != nil {
		return err
	}
	db, err := masterd.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	counts, err := db.Counts(ctx, cfg.Crawl.Name)
	if err != nil {
		return err
	}
	stats, err := masterd.ReadCrawlStats(ctx, cfg)
	if err != nil {
		return err
	}
	stats.SetElapsed(elapsed)

	// what the site saw
	hits := site.HitCounts()
	expected := site.Expected()
	missing, extra, private := 0, 0, 0
	var extraURLs []string
	for u, want := range expected {
		if hits[u] < want {
			missing++
		}
	}
	for u, n := range hits {
		switch {
		case strings.Contains(u, "/private/"):
			private += n
		case strings.HasSuffix(u, "/robots.txt"), strings.Contains(u, "/hostile/"), strings.Contains(u, "/shop/"),
			browserRequest(u):
		case n > expected[u]:
			extra += n - expected[u]
			extraURLs = append(extraURLs, fmt.Sprintf("%s (%d)", u, n))
		}
	}
	hostile, hostileHits := 0, 0
	for u, n := range hits {
		if strings.Contains(u, "/hostile/") {
			hostile++
			hostileHits += n
		}
	}
	warcFiles, _ := filepath.Glob(filepath.Join(cfg.Storage.WARCDir, "*.warc.gz"))
	minGap := time.Duration(-1)
	minPair := ""
	byHost := map[string][]testsite.Hit{}
	for _, h := range site.Hits() {
		if browserRequest(h.Path) {
			continue // requested by a rendered page itself, not by the crawler
		}
		// wall clock, as Redis stamps next-allowed times; Go's monotonic
		// clock may run at another rate while NTP slews the wall clock
		h.At = h.At.Round(0)
		byHost[h.Host] = append(byHost[h.Host], h)
	}
	for _, hs := range byHost {
		sort.Slice(hs, func(i, j int) bool { return hs[i].At.Before(hs[j].At) })
		for i := 1; i < len(hs); i++ {
			if g := hs[i].At.Sub(hs[i-1].At); minGap < 0 || g < minGap {
				minGap = g
				minPair = hs[i-1].Path + " then " + hs[i].Path
			}
		}
	}

	robotsDenied, err := db.CountExceptions(ctx, store.ExceptionFilter{Crawl: cfg.Crawl.Name, Kind: events.KindRobotsDenied})
	if err != nil {
		return err
	}
	fetchedExpected := len(expected) - missing
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nsummary of crawl %s\n", cfg.Crawl.Name)
	fmt.Fprintf(tw, "finished\t%v in %.1fs\n", st.Finished, elapsed.Seconds())
	fmt.Fprintf(tw, "URLs done\t%s (%.1f/s)\n", doneBreakdown(st.Done, counts.Pages, int64(robotsDenied)), float64(st.Done)/elapsed.Seconds())
	fmt.Fprintf(tw, "failed / lost leases\t%d / %d (failed: given up after lease.max_attempts or refused; lost: taken back from a dead slave)\n", st.Failed, st.Lost)
	fmt.Fprintf(tw, "expected URLs fetched\t%d of the %d pages of the site's link graph; the other %d pages stored are hostile pages, the shop, sitemaps and error pages\n",
		fetchedExpected, len(expected), max(counts.Pages-int64(fetchedExpected), 0))
	sort.Strings(extraURLs)
	fmt.Fprintf(tw, "extra fetches\t%d of those pages fetched more than once %s\n", extra, strings.Join(extraURLs[:min(3, len(extraURLs))], " "))
	fmt.Fprintf(tw, "robots.txt\t%d URLs disallowed and never fetched (exceptions robots_denied); %d requests reached a disallowed path (must be 0)\n",
		robotsDenied, private)
	fmt.Fprintf(tw, "closest two crawler requests to one host\t%v (delay %v): %s\n",
		minGap.Round(time.Millisecond), cfg.Politeness.Delay, minPair)
	fmt.Fprintf(tw, "hostile pages (traps, bombs, charsets)\t%d URLs, %d fetches; %d trap links dropped by the frontier\n",
		hostile, hostileHits, st.TrapDropped)
	fmt.Fprintf(tw, "duplicate content\t%d pages (links not followed again)\n", st.Duplicates)
	fmt.Fprintf(tw, "warc\t%d files in %s\n", len(warcFiles), cfg.Storage.WARCDir)
	if shop := site.Shop(); shop.Catalogue != "" && cfg.Rules.Dir != "" {
		found := 0
		for _, p := range shop.Products {
			if hits[p.URL] > 0 {
				found++
			}
		}
		fmt.Fprintf(tw, "rendered shop\t%d of %d products found behind JavaScript; %d items in MySQL (bin/demo --keep, then master export --crawl %s)\n",
			found, len(shop.Products), counts.Items, cfg.Crawl.Name)
	}
	fmt.Fprintf(tw, "mysql rows\tpages %d (one a fetch stored), exceptions %d, slave events %d, lost tasks %d, duplicates %d\n",
		counts.Pages, counts.Exceptions, counts.SlaveEvents, counts.Lost, counts.Duplicates)
	tw.Flush()
	fmt.Fprintln(out)
	stats.Render(out)
	if missing > 0 || private > 0 || !st.Finished {
		return fmt.Errorf("demo crawl incomplete: %d expected URLs missing, %d requests to robots-disallowed paths", missing, private)
	}
	return nil
}

// doneBreakdown says what the URLs done are: the pages fetched and stored
// (MySQL pages rows) and the URLs robots.txt disallowed, which are done
// without a fetch; a difference (a page stored by each attempt of a
// retried URL, a hook that ended a URL) is shown, so the sum holds.
func doneBreakdown(done, pages, robotsDenied int64) string {
	s := fmt.Sprintf("%d = %d fetched and stored (mysql pages rows) + %d disallowed by robots.txt, not fetched", done, pages, robotsDenied)
	if rest := done - pages - robotsDenied; rest != 0 {
		s += fmt.Sprintf(" %+d other (retried URLs stored once per attempt, URLs a hook ended)", rest)
	}
	return s
}

// cleanUp removes what the demo created: its crawl's Redis keys and
// MySQL rows and its own WARC directory (warcDir, "" = none).
func cleanUp(ctx context.Context, cfg *config.Config, warcDir string, out io.Writer) error {
	rdb, err := redisconn.New(cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := frontier.DeleteCrawl(ctx, rdb, cfg.Crawl.Name); err != nil {
		return err
	}
	db, err := masterd.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.DeleteCrawl(ctx, cfg.Crawl.Name)
	if err != nil {
		return err
	}
	if warcDir != "" {
		if err := os.RemoveAll(warcDir); err != nil {
			return fmt.Errorf("remove %s: %w", warcDir, err)
		}
	}
	fmt.Fprintf(out, "demo: removed crawl %s: its Redis keys, %d MySQL rows and its WARC files (bin/demo --keep keeps them)\n", cfg.Crawl.Name, rows)
	return nil
}
