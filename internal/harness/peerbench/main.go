// Command peerbench crawls make bench's synthetic site (the same hosts,
// pages, links and latency) with scrapy-redis, the peer redcrawl is
// modelled on, and reports what the crawl cost Redis a page, to set
// beside make bench's "Redis CPU s / 1,000 pages" on the same work.
//
// It needs a python with scrapy, redis-py and scrapy-redis importable
// (--python; PYTHONPATH may point at a scrapy-redis checkout) and a Redis
// of its own: the crawl's keys are deleted at the end, but INFO's CPU and
// commandstats are server-wide, so another client inflates them. A crawl
// ends when the site has served every page make bench expects; the
// spiders, which wait for more work as scrapy-redis's do, are then killed.
//
//	PYTHONPATH=/path/to/scrapy-redis/src go run ./internal/harness/peerbench \
//		--python /usr/bin/python3 --redis redis://127.0.0.1:6391/0 --procs 1,2,4 [--latency 20ms]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/benchsuite"
	"github.com/redcrawl/redcrawl/internal/harness/testsite"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

// result is one crawl's measure.
type result struct {
	pages, reqs int
	secs        float64
	redisCPU    float64 // seconds
	redisCalls  int64
	spiderCPU   float64 // seconds, the scrapy processes
	complete    bool
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("peerbench", flag.ContinueOnError)
	redisURL := fs.String("redis", "redis://127.0.0.1:6391/0", "a Redis of the bench's own")
	hosts := fs.Int("hosts", benchsuite.DefaultHosts, "site hosts")
	pages := fs.Int("pages", benchsuite.DefaultPagesPerHost, "pages per host")
	latency := fs.Duration("latency", 0, "the site's latency a response")
	procsFlag := fs.String("procs", "1,2,4", "scrapy-redis processes, one crawl each count")
	rounds := fs.Int("rounds", 1, "rounds of the counts")
	conc := fs.Int("concurrency", 32, "CONCURRENT_REQUESTS of each process (a slave's slave.concurrency)")
	python := fs.String("python", "python3", "the python with scrapy and scrapy-redis")
	timeout := fs.Duration("timeout", 10*time.Minute, "longest crawl")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *rounds < 1:
		return fmt.Errorf("--rounds %d: want at least 1", *rounds)
	case *conc < 1:
		return fmt.Errorf("--concurrency %d: want at least 1", *conc)
	case *timeout <= 0:
		return fmt.Errorf("--timeout %v: want a positive duration", *timeout)
	case *latency < 0:
		return fmt.Errorf("--latency %v: want zero or more", *latency)
	}
	var procs []int
	for _, f := range strings.Split(*procsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 64 {
			return fmt.Errorf("--procs: %q is not a count 1..64", f)
		}
		procs = append(procs, n)
	}
	opt, err := redis.ParseURL(*redisURL)
	if err != nil {
		return fmt.Errorf("--redis: %w", err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	site, err := testsite.Start(testsite.Options{Hosts: *hosts, PagesPerHost: *pages,
		LinksPerPage: benchsuite.DefaultLinksPerPage, PageBytes: benchsuite.DefaultPageBytes,
		Seed: benchsuite.SiteSeed, Latency: *latency})
	if err != nil {
		return err
	}
	defer site.Close()
	expected := site.Expected()
	dir, err := os.MkdirTemp("", "peerbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	spider := filepath.Join(dir, "peer_spider.py")
	if err := os.WriteFile(spider, []byte(spiderPy), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "peerbench: site %d hosts × %d pages (%d URLs), latency %v; scrapy-redis, %d requests a process, 1 a host; %s\n",
		*hosts, *pages, len(expected), *latency, *conc, runtime.Version())
	incomplete := 0
	for r := 0; r < *rounds; r++ {
		for _, n := range procs {
			res, err := crawl(ctx, rdb, *redisURL, site, expected, spider, *python, n, *conc, *timeout, fmt.Sprintf("peer%d-%d-%d", time.Now().Unix(), r, n))
			if err != nil {
				return err
			}
			note := ""
			if !res.complete {
				incomplete++
				note = " (INCOMPLETE: the spiders exited or the crawl timed out)"
			}
			fmt.Fprintf(out, "peerbench: %d process(es): %d of %d pages (%d requests) in %.1fs, %.0f pages/s; Redis CPU %.1f µs a page, %.2f calls a page; spiders' CPU %.2f ms a page%s\n",
				n, res.pages, len(expected), res.reqs, res.secs, float64(res.pages)/res.secs,
				res.redisCPU/float64(res.pages)*1e6, float64(res.redisCalls)/float64(res.pages),
				res.spiderCPU/float64(res.pages)*1e3, note)
		}
	}
	if incomplete > 0 {
		return fmt.Errorf("%d crawl(s) did not fetch every page: see the spiders' output above", incomplete)
	}
	return nil
}

// crawl runs n scrapy-redis processes on the site from its seed until every
// expected URL was fetched (or timeout) and measures Redis meanwhile.
func crawl(ctx context.Context, rdb *redis.Client, redisURL string, site *testsite.Site, expected map[string]int, spider, python string, n, conc int, timeout time.Duration, prefix string) (result, error) {
	var res result
	site.ResetHits()
	cpu0, calls0, err := benchsuite.RedisCPUCalls(ctx, rdb)
	if err != nil {
		return res, err
	}
	if err := rdb.LPush(ctx, prefix+":start_urls", site.Seeds()[0]).Err(); err != nil {
		return res, err
	}
	start := time.Now()
	var cmds []*exec.Cmd
	exited := make(chan struct{}, n)
	for i := range n {
		cmd := exec.Command(python, "-m", "scrapy", "runspider", spider,
			"-s", "PEER_PREFIX="+prefix, "-s", "CONCURRENT_REQUESTS="+strconv.Itoa(conc),
			"-s", "REDIS_URL="+redisURL,
			"-s", "LOG_LEVEL=WARNING")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		cmd.Env = append(os.Environ(), "PEER_PROC="+strconv.Itoa(i))
		if err := cmd.Start(); err != nil {
			stop(cmds, exited)
			return res, fmt.Errorf("start scrapy: %w", err)
		}
		cmds = append(cmds, cmd)
		go func() {
			_ = cmd.Wait()
			exited <- struct{}{}
		}()
	}
	deadline := start.Add(timeout)
	for {
		time.Sleep(50 * time.Millisecond)
		got, reqs := 0, 0
		for u, c := range site.HitCounts() {
			reqs += c
			if _, ok := expected[u]; ok {
				got++
			}
		}
		res.pages, res.reqs = got, reqs
		if got == len(expected) || time.Now().After(deadline) {
			res.complete = got == len(expected)
			break
		}
		if ctx.Err() != nil || len(exited) == n {
			break
		}
	}
	res.secs = time.Since(start).Seconds()
	cpu1, calls1, err := benchsuite.RedisCPUCalls(ctx, rdb)
	if err != nil {
		stop(cmds, exited)
		return res, err
	}
	res.redisCPU, res.redisCalls = cpu1-cpu0, calls1-calls0
	res.spiderCPU = stop(cmds, exited)
	keys, _ := rdb.Keys(ctx, prefix+":*").Result()
	if len(keys) > 0 {
		rdb.Del(ctx, keys...)
	}
	return res, nil
}

// stop ends the processes, waits for them (exited: a value as each one's
// Wait returns) and returns their CPU seconds.
func stop(cmds []*exec.Cmd, exited <-chan struct{}) float64 {
	var cpu float64
	for _, c := range cmds {
		_ = c.Process.Signal(syscall.SIGKILL)
	}
	for range cmds {
		<-exited
	}
	for _, c := range cmds {
		if c.ProcessState != nil {
			cpu += (c.ProcessState.UserTime() + c.ProcessState.SystemTime()).Seconds()
		}
	}
	return cpu
}

// spiderPy is scrapy-redis's usual setup: a RedisSpider fed through its
// start-URLs key, the scrapy-redis scheduler (a priority queue of pickled
// requests) and request-fingerprint dupefilter in Redis, and its
// RedisPipeline storing an item a page, as redcrawl stores a page event.
const spiderPy = `
import scrapy
from scrapy_redis.spiders import RedisSpider


class PeerSpider(RedisSpider):
    name = "peer"

    @classmethod
    def update_settings(cls, settings):
        super().update_settings(settings)
        p = settings.get("PEER_PREFIX")
        settings.set("REDIS_START_URLS_KEY", p + ":start_urls", priority="spider")
        settings.set("SCHEDULER_QUEUE_KEY", p + ":requests", priority="spider")
        settings.set("SCHEDULER_DUPEFILTER_KEY", p + ":dupefilter", priority="spider")
        settings.set("REDIS_ITEMS_KEY", p + ":items", priority="spider")

    custom_settings = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        "ITEM_PIPELINES": {"scrapy_redis.pipelines.RedisPipeline": 300},
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": 0,
        "ROBOTSTXT_OBEY": False,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "REQUEST_FINGERPRINTER_IMPLEMENTATION": "2.7",
    }

    def parse(self, response):
        yield {"url": response.url, "status": response.status, "length": len(response.body)}
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href)
            if url.startswith(("http://", "https://")):
                yield scrapy.Request(url, self.parse)
`
