// Package collyslave runs a colly collector (github.com/gocolly/colly/v2)
// as a redcrawl slave: what scrapy-redis is to a Scrapy spider. The slave
// claims tasks from the crawl's frontier as the stock slave does (leases,
// acks, retries, exceptions, heartbeats, robots.txt, politeness across
// every slave, sessions with their proxies, user agents and cookie jars,
// the DNS cache, the body caps, WARC, the Go hooks of slave/slaved), and
// each page is the collector's request: its OnRequest callbacks run, the
// slave's transport fetches it (colly's transport hook), and its
// OnResponseHeaders, OnResponse, OnHTML, OnXML, OnError and OnScraped
// callbacks run as they would standalone. A Visit from a callback sends a
// link to the frontier (the crawl's scope, dedup, trap filters, shards)
// instead of fetching it; AddItem sends an item through the slave's item
// pipeline (the OnItem hooks, then MySQL through the master).
//
//	c := colly.NewCollector(colly.AllowedDomains("shop.example"))
//	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
//	c.OnHTML("h1", func(e *colly.HTMLElement) {
//		collyslave.AddItem(e.Request, "title", "", map[string]any{"title": e.Text})
//	})
//	s, err := collyslave.New(cfg, c, slaved.Options{}) // instead of c.Visit(start)
//	err = s.Run(ctx)                                   // the seeds: master seed URL...
//
// What colly's settings mean in a distributed crawl:
//
//   - AllowedDomains, DisallowedDomains, URLFilters, DisallowedURLFilters
//     and MaxDepth are checked by colly on each Visit, as standalone,
//     before the link goes to the frontier, whose scope (crawl.allow_hosts,
//     allow, deny, max_depth) applies as well; colly counts a seed as depth
//     1 where crawl.max_depth counts it as 0. A seed they refuse is skipped
//     with an exception.
//   - Async and parallelism: the slave fetches slave.concurrency pages at
//     once either way. A collector that is not Async has its callbacks run
//     one page at a time, as standalone, so they need no locks; an Async
//     collector's run for several pages at once.
//   - LimitRule (Limit, Limits) is refused: the frontier's politeness
//     (politeness.delay and host_concurrency, a rule file's politeness)
//     spaces every slave's requests to a host.
//   - AllowURLRevisit is refused: the frontier fetches a URL once per crawl
//     whichever slave finds it (master seed --recrawl fetches the crawl
//     again). Its dedup replaces colly's visited set, which is not kept:
//     Visit never returns an AlreadyVisitedError and HasVisited is false.
//   - Cookies: the collector's jar works per slave (cookies a site sets
//     reach the later requests of the slave that got them). With
//     c.DisableCookies() and fetch.cookies: true they are kept in the
//     slave's sessions instead, one jar per proxy and user agent. Both
//     jars at once are refused.
//   - CacheDir is refused: there is no local response cache
//     (storage.warc_dir keeps the responses).
//   - IgnoreRobotsTxt: robots.txt is the slave's (politeness.obey_robots,
//     fetched once per host for every slave); a collector that obeys it
//     under a config that does not is refused.
//   - UserAgent: the sessions send fetch.user_agent, or rotate
//     fetch.user_agents; another than colly's default or fetch.user_agent
//     is refused. Headers, and headers the OnRequest callbacks set, are
//     sent.
//   - MaxBodySize: bodies are capped at fetch.max_body_bytes (a larger page
//     fails as too_large); a smaller MaxBodySize still cuts what callbacks
//     see. SetRequestTimeout bounds a page's request besides fetch.timeout
//     (colly's default 10 s is dropped). TraceHTTP traces the slave's
//     request.
//   - SetStorage, SetRedirectHandler, a transport of the collector's own
//     (WithTransport, SetProxy, SetProxyFunc), MaxRequests and CheckHead
//     are refused, each with its fix.
//
// What a callback sees:
//
//   - A redirect is not followed within the request: its target goes to
//     the frontier like a link (crawl.max_redirects hops) and the callbacks
//     run when it is fetched; the redirect itself runs none (standalone,
//     colly follows it silently).
//   - OnError runs on every failed attempt: the slave retries timeouts,
//     5xx and 429 (lease.max_attempts); Request.Retry from a callback
//     retries the page later, with the slave's backoff. Post, Head and
//     other requests than GET from a callback are refused with an
//     exception on the page: a task is a URL.
//   - r.Ctx is the page's own: the values a callback puts there do not
//     travel with a link, whose page starts with an empty context on the
//     slave that fetches it.
//   - c.Visit outside a callback fails (seed the crawl with master seed),
//     as does a request of another collector (Clone): a slave runs one
//     collector.
//   - A sitemap (crawl.sitemaps) is read by the slave, not the callbacks.
package collyslave

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// collyUserAgent is colly's default User-Agent.
const collyUserAgent = "colly - https://github.com/gocolly/colly"

// collyTimeout is colly's default request timeout.
const collyTimeout = 10 * time.Second

// New returns a slave of the crawl cfg names that runs c's callbacks on
// the pages it claims; register the collector's callbacks before Run, and
// the slave's own hooks (OnItem sinks...) on the slave as with
// slaved.New. It changes c for the slave: its transport, its OnRequest
// and OnError callback lists (wrapped), and it turns Async off (see the
// package doc). It refuses, with one error listing their fixes, the
// settings a distributed crawl cannot hold.
func New(cfg *config.Config, c *colly.Collector, opt slaved.Options) (*slaved.Slave, error) {
	if c == nil {
		return nil, errors.New("collyslave: no collector")
	}
	in, err := inspect(c)
	if err != nil {
		return nil, err
	}
	if err := check(c, in, cfg); err != nil {
		return nil, err
	}
	s, err := slaved.New(cfg, opt)
	if err != nil {
		return nil, err
	}
	cs := newRunner(c, in)
	if in.timeout() == collyTimeout {
		c.SetRequestTimeout(0) // fetch.timeout bounds the fetch
	}
	c.IgnoreRobotsTxt = true // robots.txt is the slave's
	c.AllowURLRevisit = true // the frontier dedups
	c.Async = false          // a callback's Visit returns once its link is noted
	c.WithTransport(&transport{cs: cs})
	s.OnFetch(cs.fetch)
	s.OnResponse(cs.page)
	return s, nil
}

// check refuses what cannot hold in a distributed crawl, naming each fix.
func check(c *colly.Collector, in *internals, cfg *config.Config) error {
	var errs []string
	add := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if c.CacheDir != "" {
		add("CacheDir %q: a distributed crawl has no local response cache (storage.warc_dir keeps the responses): remove it", c.CacheDir)
	}
	if c.AllowURLRevisit {
		add("AllowURLRevisit: the frontier fetches each URL once per crawl, whichever slave finds it (master seed --recrawl fetches the crawl again): remove it")
	}
	if c.MaxRequests > 0 {
		add("MaxRequests %d: a collector's count would be per slave: bound the crawl with crawl.max_depth or crawl.max_pages_per_host instead", c.MaxRequests)
	}
	if c.CheckHead {
		add("CheckHead: the frontier sends no HEAD requests: remove it")
	}
	if n := in.limitRules(); n > 0 {
		add("%d LimitRule(s): the frontier's politeness spaces every slave's requests to a host: set politeness.delay and politeness.host_concurrency (or a rule file's politeness) and remove Limit", n)
	}
	if in.customStorage() {
		add("SetStorage: the frontier keeps the crawl's queue and visited URLs for every slave, with leases: remove the storage")
	}
	if in.redirectHandler() {
		add("SetRedirectHandler: redirects are followed through the frontier (crawl.max_redirects hops): remove the handler")
	}
	if in.transport() {
		add("a transport of the collector's own (WithTransport, SetProxy, SetProxyFunc): the slave's sessions fetch every page: remove it and set fetch.proxies or fetch.proxy_pools")
	}
	if ua := c.UserAgent; ua != collyUserAgent && ua != cfg.Fetch.UserAgent {
		add("UserAgent %q: the slave's sessions send fetch.user_agent (%q) and read robots.txt for it: set fetch.user_agent to it and remove UserAgent", ua, cfg.Fetch.UserAgent)
	}
	if !c.IgnoreRobotsTxt && !cfg.Politeness.ObeyRobots {
		add("the collector obeys robots.txt but politeness.obey_robots is false: set politeness.obey_robots: true (the slave reads robots.txt for every slave)")
	}
	if in.jar() && cfg.Fetch.Cookies {
		add("two cookie jars, the collector's (per slave) and the sessions' (fetch.cookies: true): call c.DisableCookies() to keep cookies in the sessions, or set fetch.cookies: false")
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("collyslave: the collector has settings a distributed crawl cannot hold:\n  - %s", strings.Join(errs, "\n  - "))
}

// ErrNotAPage is AddItem's error for a request that is not a page of a
// collyslave slave (a plain collector's, or a request made outside the
// callbacks).
var ErrNotAPage = errors.New("not a page of a collyslave slave")

// AddItem emits an item from a callback of the page r (e.Request,
// r.Request): it goes through the slave's item pipeline, its OnItem hooks
// then MySQL's items table (unless slaved.Options.SkipItemStore), when
// the page is done; an item of a page that is retried is not stored.
// itemURL names the item ("" is the page's URL); one row is kept per item
// name and URL. fields is a map[string]any or anything that encodes as a
// JSON object (a struct with json tags).
func AddItem(r *colly.Request, name, itemURL string, fields any) error {
	if name == "" {
		return errors.New("collyslave: add item: no name")
	}
	var t *task
	if r != nil {
		t = taskOf(r.Ctx)
	}
	if t == nil {
		return fmt.Errorf("collyslave: add item %s: %w", name, ErrNotAPage)
	}
	m, ok := fields.(map[string]any)
	if !ok {
		b, err := json.Marshal(fields)
		if err != nil {
			return fmt.Errorf("collyslave: add item %s: %w", name, err)
		}
		if err := json.Unmarshal(b, &m); err != nil || m == nil {
			return fmt.Errorf("collyslave: add item %s: fields must encode as a JSON object, not %s", name, b)
		}
	}
	t.addItem(item{name: name, url: itemURL, fields: m})
	return nil
}
