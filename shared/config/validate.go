package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/rules"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

var (
	crawlNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	// dbNameRE keeps the database name safe to quote in CREATE DATABASE.
	dbNameRE = regexp.MustCompile(`^[A-Za-z0-9_$-]{1,64}$`)
	// hostLabelRE is one label of a host name; underscores are tolerated
	// because they occur in real host names.
	hostLabelRE = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$`)
)

// Validate checks every key and returns an *Error naming the first bad one,
// or nil. Keys are checked in the order of the struct, except that master
// comes before slave, whose heartbeat_interval is bounded by
// master.dead_after.
//
// fetch.timeout is only required to be positive, not shorter than
// lease.duration: a slave extends the leases of the tasks it is still
// fetching, so a long fetch does not lose its lease.
func (c *Config) Validate() error {
	for _, check := range []func() error{
		c.validateStores, c.validateCrawl, c.validatePoliteness, c.validateLease,
		c.validateMaster, c.validateSlave, c.validateFetch, c.validateSessions,
		c.validateDNS, c.validateStorage, c.validateRest,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateStores() error {
	if c.Redis.StartupTimeout < 0 {
		return errorf("redis.startup_timeout", "%v must be >= 0 (0 = wait forever)", c.Redis.StartupTimeout)
	}
	if c.Redis.WaitReplicas < 0 || c.Redis.WaitReplicas > 16 {
		return errorf("redis.wait_replicas", "%d must be 0 to 16 (0 = do not wait for replicas)", c.Redis.WaitReplicas)
	}
	if c.Redis.WaitTimeout < time.Millisecond || c.Redis.WaitTimeout > time.Minute {
		return errorf("redis.wait_timeout", "%v must be 1ms to 1m", c.Redis.WaitTimeout)
	}
	if c.MySQL.StartupTimeout < 0 {
		return errorf("mysql.startup_timeout", "%v must be >= 0 (0 = wait forever)", c.MySQL.StartupTimeout)
	}
	if err := c.resolveSecrets(); err != nil {
		return err
	}
	if _, err := c.RedisOptions(); err != nil {
		return err
	}
	d, err := c.MySQLConfig()
	if err != nil {
		return err
	}
	if d.DBName == "" {
		return &Error{Key: "mysql.dsn", Msg: "names no database (…/crawler?parseTime=true)"}
	}
	if !dbNameRE.MatchString(d.DBName) {
		return errorf("mysql.dsn", "database name %q must be 1 to 64 of A-Z a-z 0-9 _ $ -", d.DBName)
	}
	if c.MySQL.MigrateDSN != "" {
		m, err := c.MigrateMySQLConfig()
		if err != nil {
			return err
		}
		if m.DBName != d.DBName {
			return errorf("mysql.migrate_dsn", "names database %q, not mysql.dsn's %q: the migration user must migrate the crawl's database", m.DBName, d.DBName)
		}
	}
	return c.checkClearText()
}

func (c *Config) validateCrawl() error {
	k := c.Crawl
	if !crawlNameRE.MatchString(k.Name) {
		return errorf("crawl.name", "%q must be 1 to 64 of A-Z a-z 0-9 _ . -", k.Name)
	}
	if k.MaxDepth < 0 {
		return errorf("crawl.max_depth", "%d must be >= 0 (0 = unlimited)", k.MaxDepth)
	}
	for i, h := range k.AllowHosts {
		if msg := checkHost(h); msg != "" {
			return errorf(fmt.Sprintf("crawl.allow_hosts[%d]", i), "%q %s", h, msg)
		}
	}
	for _, list := range []struct {
		key      string
		patterns []string
	}{{"crawl.allow", k.Allow}, {"crawl.deny", k.Deny}} {
		for i, p := range list.patterns {
			key := fmt.Sprintf("%s[%d]", list.key, i)
			if p == "" {
				return &Error{Key: key, Msg: "empty regex would match every url"}
			}
			if _, err := regexp.Compile(p); err != nil {
				return &Error{Key: key, Msg: "invalid regex", Err: err}
			}
		}
	}
	for i, p := range k.StripParams {
		key := fmt.Sprintf("crawl.strip_params[%d]", i)
		if p == "" {
			return &Error{Key: key, Msg: "empty parameter name"}
		}
		if _, err := urlx.NewCanonicalizer([]string{p}); err != nil {
			return &Error{Key: key, Msg: fmt.Sprintf("%q: a name, a prefix ending in *, optionally followed by =<token> (strip only session-token values)", p), Err: err}
		}
	}
	if k.MaxRedirects < 0 || k.MaxRedirects > 20 {
		return errorf("crawl.max_redirects", "%d must be in [0, 20]", k.MaxRedirects)
	}
	switch k.Strategy {
	case "bfs", "dfs", "priority", "aopic":
	default:
		return errorf("crawl.strategy", "%q must be one of bfs, dfs, priority, aopic", k.Strategy)
	}
	switch k.Sitemaps {
	case "robots", "seed", "off":
	default:
		return errorf("crawl.sitemaps", "%q must be one of robots, seed, off", k.Sitemaps)
	}
	for _, w := range []struct {
		key string
		v   float64
	}{{"crawl.priority_backlinks", k.PriorityBacklinks}, {"crawl.priority_url", k.PriorityURL}} {
		if !(w.v >= 0 && w.v <= 1e6) {
			return errorf(w.key, "%v must be in [0, 1e6]", w.v)
		}
	}
	if !(k.AOPICTax >= 0 && k.AOPICTax < 1) {
		return errorf("crawl.aopic_tax", "%v must be in [0, 1)", k.AOPICTax)
	}
	if k.MaxURLLength < 64 || k.MaxURLLength > 65536 {
		return errorf("crawl.max_url_length", "%d must be in [64, 65536]", k.MaxURLLength)
	}
	if k.MaxPathRepeat < 0 {
		return errorf("crawl.max_path_repeat", "%d must be >= 0 (0 = no check)", k.MaxPathRepeat)
	}
	if k.MaxPathSegments < 0 {
		return errorf("crawl.max_path_segments", "%d must be >= 0 (0 = no check)", k.MaxPathSegments)
	}
	if k.MaxQueryParams < 0 {
		return errorf("crawl.max_query_params", "%d must be >= 0 (0 = no check)", k.MaxQueryParams)
	}
	if k.MaxPagesPerHost < 0 {
		return errorf("crawl.max_pages_per_host", "%d must be >= 0 (0 = unlimited)", k.MaxPagesPerHost)
	}
	if k.MaxDateVariants < 0 {
		return errorf("crawl.max_date_variants", "%d must be >= 0 (0 = counted as any query variant)", k.MaxDateVariants)
	}
	if k.MaxQueryVariants < 0 {
		return errorf("crawl.max_query_variants", "%d must be >= 0 (0 = unlimited)", k.MaxQueryVariants)
	}
	if k.MaxPages < 0 {
		return errorf("crawl.max_pages", "%d must be >= 0 (0 = no limit)", k.MaxPages)
	}
	if k.MaxItems < 0 {
		return errorf("crawl.max_items", "%d must be >= 0 (0 = no limit)", k.MaxItems)
	}
	if k.MaxDuration < 0 {
		return errorf("crawl.max_duration", "%v must be >= 0 (0 = no limit)", k.MaxDuration)
	}
	return nil
}

// checkHost returns what is wrong with an allow_hosts entry, or "".
func checkHost(h string) string {
	name := strings.TrimPrefix(h, "*.")
	if name == "" || len(name) > 253 {
		return "is not a host name"
	}
	if strings.ContainsAny(name, ":/") {
		return "must be a bare host name, without scheme, port or path"
	}
	for _, label := range strings.Split(name, ".") {
		if !hostLabelRE.MatchString(label) {
			return "is not a host name (letters, digits, - and _ in dot-separated labels, " +
				"optionally after *.; an internationalized name in its xn-- form)"
		}
	}
	return ""
}

func (c *Config) validatePoliteness() error {
	p := c.Politeness
	if p.Delay < 0 {
		return errorf("politeness.delay", "%v must be >= 0", p.Delay)
	}
	if !(p.Jitter >= 0 && p.Jitter <= 10) { // also rejects NaN
		return errorf("politeness.jitter", "%v must be in [0, 10]", p.Jitter)
	}
	if p.HostConcurrency < 1 {
		return errorf("politeness.host_concurrency", "%d must be >= 1", p.HostConcurrency)
	}
	if p.MaxCrawlDelay < 0 {
		return errorf("politeness.max_crawl_delay", "%v must be >= 0", p.MaxCrawlDelay)
	}
	if p.RobotsTTL <= 0 {
		return errorf("politeness.robots_ttl", "%v must be > 0", p.RobotsTTL)
	}
	switch p.JitterDist {
	case "uniform", "exponential", "none":
	default:
		return errorf("politeness.jitter_dist", "%q must be uniform, exponential or none", p.JitterDist)
	}
	if !(p.AutoThrottleTarget > 0 && p.AutoThrottleTarget <= 1000) {
		return errorf("politeness.autothrottle_target", "%v must be in (0, 1000]", p.AutoThrottleTarget)
	}
	if p.AutoThrottleMaxDelay < p.Delay {
		return errorf("politeness.autothrottle_max_delay", "%v must be >= politeness.delay (%v)", p.AutoThrottleMaxDelay, p.Delay)
	}
	return nil
}

func (c *Config) validateLease() error {
	l := c.Lease
	if l.Duration < time.Second {
		return errorf("lease.duration", "%v must be >= 1s", l.Duration)
	}
	if l.MaxAttempts < 1 {
		return errorf("lease.max_attempts", "%d must be >= 1", l.MaxAttempts)
	}
	if l.RetryBase <= 0 {
		return errorf("lease.retry_base", "%v must be > 0", l.RetryBase)
	}
	if l.RetryMax < l.RetryBase {
		return errorf("lease.retry_max", "%v must be >= lease.retry_base (%v)", l.RetryMax, l.RetryBase)
	}
	return nil
}

func (c *Config) validateSlave() error {
	s := c.Slave
	if s.Concurrency < 1 || s.Concurrency > 4096 {
		return errorf("slave.concurrency", "%d must be in [1, 4096]", s.Concurrency)
	}
	if s.HeartbeatInterval <= 0 {
		return errorf("slave.heartbeat_interval", "%v must be > 0", s.HeartbeatInterval)
	}
	if s.HeartbeatInterval >= c.Master.DeadAfter/2 {
		return errorf("slave.heartbeat_interval",
			"%v must be less than half of master.dead_after (%v), so that one late heartbeat does not make a slave dead",
			s.HeartbeatInterval, c.Master.DeadAfter)
	}
	if s.ShutdownTimeout < 0 {
		return errorf("slave.shutdown_timeout", "%v must be >= 0", s.ShutdownTimeout)
	}
	if s.IdlePoll <= 0 {
		return errorf("slave.idle_poll", "%v must be > 0", s.IdlePoll)
	}
	switch s.Profile {
	case "", "small":
	default:
		return errorf("slave.profile", "%q must be small or empty", s.Profile)
	}
	if s.MemoryLimit < -1 || s.MemoryLimit > 0 && s.MemoryLimit < 16<<20 {
		return errorf("slave.memory_limit", "%d must be 0 (auto), -1 (none) or at least 16MiB", s.MemoryLimit)
	}
	if s.LinkCache < 0 || s.LinkCache > 1<<24 {
		return errorf("slave.link_cache", "%d must be in [0, 16777216] (0 = no cache)", s.LinkCache)
	}
	if s.ProgressEvery < 0 {
		return errorf("slave.progress_every", "%v must be >= 0 (0 = no progress lines)", s.ProgressEvery)
	}
	if s.MetricsListen != "" {
		if msg := checkListen(s.MetricsListen); msg != "" {
			return errorf("slave.metrics_listen", "%q %s", s.MetricsListen, msg)
		}
	}
	return nil
}

// checkListen checks a host:port listen address; it returns why it is bad,
// or "".
func checkListen(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "must be host:port (127.0.0.1:8080, :8080)"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "has a bad port (0 to 65535)"
	}
	return ""
}

func (c *Config) validateFetch() error {
	f := c.Fetch
	if f.Timeout <= 0 {
		return errorf("fetch.timeout", "%v must be > 0", f.Timeout)
	}
	if f.MaxBodyBytes <= 0 {
		return errorf("fetch.max_body_bytes", "%d must be > 0", f.MaxBodyBytes)
	}
	if f.UserAgent == "" {
		return &Error{Key: "fetch.user_agent", Msg: "must not be empty"}
	}
	if badUserAgent(f.UserAgent) {
		return errorf("fetch.user_agent", "%q must not contain control characters (CR, LF...)", f.UserAgent)
	}
	if f.MemoryBodyBytes < 0 || f.MemoryBodyBytes > 64<<20 {
		return errorf("fetch.memory_body_bytes", "%d must be in [0, 64MiB]", f.MemoryBodyBytes)
	}
	return nil
}

func badUserAgent(ua string) bool {
	return strings.ContainsFunc(ua, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f })
}

// validateSessions checks the proxies, user agents and ban detection.
func (c *Config) validateSessions() error {
	f := c.Fetch
	for i, p := range f.Proxies {
		if msg := CheckProxyURL(p); msg != "" {
			return errorf(fmt.Sprintf("fetch.proxies[%d]", i), "%s", msg)
		}
	}
	for i, ua := range f.UserAgents {
		if ua == "" || badUserAgent(ua) {
			return errorf(fmt.Sprintf("fetch.user_agents[%d]", i), "%q must be non-empty, without control characters", ua)
		}
	}
	if f.SessionsPerProxy < 1 || f.SessionsPerProxy > 1024 {
		return errorf("fetch.sessions_per_proxy", "%d must be in [1, 1024]", f.SessionsPerProxy)
	}
	if f.StickyRequests < 0 {
		return errorf("fetch.sticky_requests", "%d must be >= 0", f.StickyRequests)
	}
	for i, st := range f.BanStatuses {
		if st < 100 || st > 599 {
			return errorf(fmt.Sprintf("fetch.ban_statuses[%d]", i), "%d is not an HTTP status (100-599)", st)
		}
	}
	if f.BanBodyRegex != "" {
		if _, err := regexp.Compile(f.BanBodyRegex); err != nil {
			return &Error{Key: "fetch.ban_body_regex", Msg: "invalid regex", Err: err}
		}
	}
	if f.ProxyCooldown <= 0 {
		return errorf("fetch.proxy_cooldown", "%v must be > 0", f.ProxyCooldown)
	}
	if f.ProxyCooldownMax < f.ProxyCooldown {
		return errorf("fetch.proxy_cooldown_max", "%v must be >= fetch.proxy_cooldown (%v)", f.ProxyCooldownMax, f.ProxyCooldown)
	}
	if f.ProxyMaxErrors < 1 {
		return errorf("fetch.proxy_max_errors", "%d must be >= 1", f.ProxyMaxErrors)
	}
	if f.SessionMaxUses < 0 {
		return errorf("fetch.session_max_uses", "%d must be >= 0 (0 = unlimited)", f.SessionMaxUses)
	}
	names := make([]string, 0, len(f.ProxyPools))
	for name := range f.ProxyPools {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !crawlNameRE.MatchString(name) {
			return errorf("fetch.proxy_pools", "pool name %q must be 1 to 64 of A-Z a-z 0-9 _ . -", name)
		}
		if len(f.ProxyPools[name]) == 0 {
			return errorf("fetch.proxy_pools."+name, "an empty pool")
		}
		for i, p := range f.ProxyPools[name] {
			if msg := CheckProxyURL(p); msg != "" {
				return errorf(fmt.Sprintf("fetch.proxy_pools.%s[%d]", name, i), "%s", msg)
			}
		}
	}
	return nil
}

// CheckProxyURL returns what is wrong with a proxy URL, or "". The message
// never repeats the URL, which may hold a password.
func CheckProxyURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "invalid proxy url"
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return fmt.Sprintf("proxy scheme %q must be http, https, socks5 or socks5h", u.Scheme)
	}
	if u.Hostname() == "" {
		return "proxy url has no host (want e.g. http://user:pass@proxy:3128)"
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return "proxy url must not have a path or query"
	}
	return ""
}

func (c *Config) validateDNS() error {
	d := c.DNS
	if d.Server != "" {
		host, port, err := net.SplitHostPort(d.Server)
		if err != nil || host == "" || port == "" {
			return errorf("dns.server", "%q must be host:port (e.g. 127.0.0.53:53), or empty for the system resolver", d.Server)
		}
	}
	for _, x := range []struct {
		key string
		v   time.Duration
	}{
		{"dns.min_ttl", d.MinTTL}, {"dns.negative_ttl", d.NegativeTTL},
		{"dns.slow_threshold", d.SlowThreshold}, {"dns.timeout", d.Timeout},
	} {
		if x.v <= 0 {
			return errorf(x.key, "%v must be > 0", x.v)
		}
	}
	if d.MaxTTL < d.MinTTL {
		return errorf("dns.max_ttl", "%v must be >= dns.min_ttl (%v)", d.MaxTTL, d.MinTTL)
	}
	if d.CacheSize < 16 {
		return errorf("dns.cache_size", "%d must be >= 16", d.CacheSize)
	}
	if d.PrefetchWorkers < 1 || d.PrefetchWorkers > 1024 {
		return errorf("dns.prefetch_workers", "%d must be in [1, 1024]", d.PrefetchWorkers)
	}
	return nil
}

func (c *Config) validateStorage() error {
	if c.Storage.WARCMaxFileBytes < 1<<20 {
		return errorf("storage.warc_max_file_bytes", "%d must be >= 1MiB", c.Storage.WARCMaxFileBytes)
	}
	if c.Rules.Poll <= 0 {
		return errorf("rules.poll", "%v must be > 0", c.Rules.Poll)
	}
	r := c.Render
	if r.Enabled && r.ChromePath == "" {
		return &Error{Key: "render.chrome_path", Msg: "must name the Chromium binary when render.enabled is true"}
	}
	if r.Tabs < 1 || r.Tabs > 64 {
		return errorf("render.tabs", "%d must be in [1, 64]", r.Tabs)
	}
	if r.MemoryBytes < 16<<20 {
		return errorf("render.memory_bytes", "%d must be >= 16MiB", r.MemoryBytes)
	}
	return nil
}

func (c *Config) validateMaster() error {
	m := c.Master
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"master.dead_after", m.DeadAfter},
		{"master.recover_interval", m.RecoverInterval},
		{"master.quiescence", m.Quiescence},
		{"master.heartbeat_sample", m.HeartbeatSample},
		{"master.shard_lease", m.ShardLease},
	} {
		if d.v <= 0 {
			return errorf(d.key, "%v must be > 0", d.v)
		}
	}
	if m.SinkBatch < 1 || m.SinkBatch > 10000 {
		return errorf("master.sink_batch", "%d must be in [1, 10000]", m.SinkBatch)
	}
	return nil
}

func (c *Config) validateRest() error {
	if c.Dedup.ExpectedURLs < 1000 {
		return errorf("dedup.expected_urls", "%d must be >= 1000", c.Dedup.ExpectedURLs)
	}
	switch c.Dedup.Mode {
	case "exact", "bloom":
	default:
		return errorf("dedup.mode", "%q must be exact or bloom", c.Dedup.Mode)
	}
	if !(c.Dedup.FalsePositiveRate >= 1e-12 && c.Dedup.FalsePositiveRate <= 0.1) {
		return errorf("dedup.false_positive_rate", "%v must be in [1e-12, 0.1]", c.Dedup.FalsePositiveRate)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return errorf("log.level", "%q must be one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return errorf("log.format", "%q must be text or json", c.Log.Format)
	}
	if c.Crawl.Shards < 1 || c.Crawl.Shards > 1024 {
		return errorf("crawl.shards", "%d must be 1 to 1024", c.Crawl.Shards)
	}
	if c.Crawl.Schedule != "" {
		if _, err := rules.ParseSchedule(c.Crawl.Schedule); err != nil {
			return &Error{Key: "crawl.schedule", Msg: "want a 5-field cron expression or a descriptor (@daily, @every 6h)", Err: err}
		}
	}
	if a := c.Admin; a.Listen != "" {
		if msg := checkListen(a.Listen); msg != "" {
			return errorf("admin.listen", "%q %s", a.Listen, msg)
		}
		key := "admin.token"
		if a.TokenFile != "" {
			key = "admin.token_file"
		}
		if strings.ContainsAny(a.Token, "\r\n \t") {
			return &Error{Key: key, Msg: "must not contain spaces or line breaks"}
		}
		if a.Token != "" && len(a.Token) < 16 {
			return &Error{Key: key, Msg: "must be at least 16 characters (or empty: no actions, reads only with admin.public_read)"}
		}
	}
	if t := c.Admin.SessionTTL; t < time.Minute || t > 720*time.Hour {
		return errorf("admin.session_ttl", "%v must be in [1m, 720h]", t)
	}
	for i, p := range c.Admin.SDAllow {
		if _, err := parseCIDR(p); err != nil {
			return &Error{Key: fmt.Sprintf("admin.sd_allow[%d]", i), Err: err,
				Msg: fmt.Sprintf("%q is not a CIDR: write a range as 10.0.0.0/8 or fd00::/8, one address as 10.0.0.7/32", p)}
		}
	}
	if _, err := c.AdminTLSConfig(); err != nil {
		return err
	}
	return c.validateAPI()
}

// validateAPI checks the work API's keys, the master's and the slave's.
func (c *Config) validateAPI() error {
	a := c.API
	if a.Listen != "" {
		if msg := checkListen(a.Listen); msg != "" {
			return errorf("api.listen", "%q %s", a.Listen, msg)
		}
		if a.TLSCert == "" && !a.AllowInsecure {
			return errorf("api.tls_cert", "the work API speaks TLS: set api.tls_cert and api.tls_key "+
				"(or api.allow_insecure: true on a loopback api.listen, for a demo or tests)")
		}
		if a.AllowInsecure && a.TLSCert == "" {
			if host, _, err := net.SplitHostPort(a.Listen); err == nil && !IsLoopback(host) {
				return errorf("api.allow_insecure", "%q is not loopback: tokens would travel in clear text; "+
					"set api.tls_cert and api.tls_key", a.Listen)
			}
		}
	}
	if a.MaxInFlight < 1 || a.MaxInFlight > 1000000 {
		return errorf("api.max_in_flight", "%d must be 1 to 1000000", a.MaxInFlight)
	}
	if !(a.Rate > 0) {
		return errorf("api.rate", "%v must be > 0 (requests a second a token may make)", a.Rate)
	}
	if a.MaxBody < 64<<10 || a.MaxBody > 1<<30 {
		return errorf("api.max_body", "%d must be 64 KiB to 1 GiB", a.MaxBody)
	}
	if a.MaxLinks < 1 || a.MaxLinks > 50000 {
		return errorf("api.max_links", "%d must be 1 to 50000", a.MaxLinks)
	}
	if a.EventRate < 0 {
		return errorf("api.event_rate", "%d must be >= 0 (bytes of events a second a token may send; 0 = no limit)", a.EventRate)
	}
	if a.MaxStream < 0 {
		return errorf("api.max_stream", "%d must be >= 0 (bytes of a slave's events not yet stored; 0 = no limit)", a.MaxStream)
	}
	if a.DecodeBudget < a.MaxBody {
		return errorf("api.decode_budget", "%d must be at least api.max_body (%d): a largest body must fit", a.DecodeBudget, a.MaxBody)
	}
	if _, err := c.APITLSConfig(); err != nil {
		return err
	}
	s := c.Slave.API
	for i, raw := range s.URLs {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || (u.Path != "" && u.Path != "/") {
			return errorf(fmt.Sprintf("slave.api.urls[%d]", i), "%q: want https://host:port (a master's api.listen)", raw)
		}
		if u.Scheme == "http" && !IsLoopback(u.Hostname()) {
			return errorf(fmt.Sprintf("slave.api.urls[%d]", i), "%q: http:// to a remote master would send the token in clear text; use https://", raw)
		}
	}
	if len(s.URLs) > 0 && s.TokenFile == "" {
		return errorf("slave.api.token_file", "a slave of the work API needs its token: set slave.api.token_file "+
			"to the file bin/master token issue wrote")
	}
	return nil
}

func errorf(key, format string, args ...any) *Error {
	return &Error{Key: key, Msg: fmt.Sprintf(format, args...)}
}
