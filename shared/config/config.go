// Package config holds redcrawl's one typed configuration. It is loaded once
// (defaults, then config.yaml, then CRAWLER_* environment variables) by Load,
// validated by Validate, and handed to constructors as a struct: no package
// other than this one reads viper. It is data: the Redis clients it
// describes are made by shared/redisconn.
package config

import "time"

// Config is the whole configuration of a master or a slave. Both read the
// same file so that they agree on the crawl, its scope and its politeness.
type Config struct {
	Redis      Redis      `mapstructure:"redis"`
	MySQL      MySQL      `mapstructure:"mysql"`
	Crawl      Crawl      `mapstructure:"crawl"`
	Politeness Politeness `mapstructure:"politeness"`
	Lease      Lease      `mapstructure:"lease"`
	Slave      Slave      `mapstructure:"slave"`
	Fetch      Fetch      `mapstructure:"fetch"`
	Master     Master     `mapstructure:"master"`
	DNS        DNS        `mapstructure:"dns"`
	Storage    Storage    `mapstructure:"storage"`
	Rules      Rules      `mapstructure:"rules"`
	Render     Render     `mapstructure:"render"`
	Dedup      Dedup      `mapstructure:"dedup"`
	Log        Log        `mapstructure:"log"`
	Admin      Admin      `mapstructure:"admin"`
	API        API        `mapstructure:"api"`
}

// API is the master's work API: slaves on machines you do not trust get
// and return work through it with a token, holding no Redis or MySQL
// credential (master/workapi; a slave uses it with slave.api.urls).
type API struct {
	// Listen is the work API's address (host:port); "" = no work API.
	Listen string `mapstructure:"listen"`
	// TLSCert and TLSKey are PEM files of the server's certificate (chain)
	// and key: the API speaks HTTPS (HTTP/1.1 and HTTP/2). Required unless
	// AllowInsecure.
	TLSCert string `mapstructure:"tls_cert"`
	TLSKey  string `mapstructure:"tls_key"`
	// AllowInsecure serves plain HTTP (HTTP/1.1) without TLS: only for a
	// loopback address (a demo, tests); tokens would travel in clear text.
	AllowInsecure bool `mapstructure:"allow_insecure"`
	// MaxInFlight is the most leases a token's slave holds (per shard);
	// a token may set its own (bin/master token issue --max-in-flight).
	MaxInFlight int `mapstructure:"max_in_flight"`
	// Rate is the requests a second a token may make (bursts of twice as
	// many); a token may set its own.
	Rate float64 `mapstructure:"rate"`
	// MaxBody is the largest request body, in bytes.
	MaxBody int64 `mapstructure:"max_body"`
	// MaxLinks is the most links of one completion (a sitemap's 50,000).
	MaxLinks int `mapstructure:"max_links"`
	// EventRate is the bytes of events (pages, items, exceptions) a second
	// a token may send, bursts of four times as many; 0 = no limit.
	EventRate int64 `mapstructure:"event_rate"`
	// MaxStream is the most bytes of a slave's events the sink has not
	// stored yet (per shard); past it the slave's completions wait (429).
	// 0 = no limit.
	MaxStream int64 `mapstructure:"max_stream"`
	// DecodeBudget is the most bytes of request bodies the API decodes at
	// once, every token together (at least MaxBody): what bounds the
	// master's memory under many large requests. The tokens share it
	// fairly, served in turn: one that floods it keeps only itself waiting.
	DecodeBudget int64 `mapstructure:"decode_budget"`
}

// SlaveAPI makes a slave a client of the master's work API instead of
// Redis: it then needs no Redis or MySQL credential (redis.url is not
// used).
type SlaveAPI struct {
	// URLs are the masters' work API URLs (https://host:port), tried in
	// turn; empty = the slave talks to Redis (a direct slave).
	URLs []string `mapstructure:"urls"`
	// TokenFile holds the slave's token (bin/master token issue).
	TokenFile string `mapstructure:"token_file"`
	// CAFile is the PEM CA that signed the masters' certificates; "" =
	// the system's roots.
	CAFile string `mapstructure:"ca_file"`
}

// Admin is the master's HTTP server: dashboard, JSON API, /metrics.
type Admin struct {
	// Listen is the master's admin address (host:port); "" = no server.
	Listen string `mapstructure:"listen"`
	// Token is required by every action and, unless PublicRead, by every
	// read (Authorization: Bearer, or the dashboard's login). Empty = the
	// server refuses everything but public reads. Never logged.
	Token string `mapstructure:"token"`
	// PublicRead lets reads (dashboard, GET API, /metrics) through without
	// the token.
	PublicRead bool `mapstructure:"public_read"`
	// SessionTTL is how long a dashboard login lasts (1m to 720h).
	SessionTTL time.Duration `mapstructure:"session_ttl"`
	// TLSCert and TLSKey are PEM files of the server's certificate (chain)
	// and key; both set = serve HTTPS (TLS 1.2 or later), neither = HTTP.
	TLSCert string `mapstructure:"tls_cert"`
	TLSKey  string `mapstructure:"tls_key"`
	// AllowInsecure lets a Token be used over plain HTTP on an address
	// that is not loopback.
	AllowInsecure bool `mapstructure:"allow_insecure"`
	// SDAllow lists the address ranges (CIDRs) whose slave metrics
	// addresses Prometheus service discovery (/api/v1/sd) may list: a
	// slave reports its address in its heartbeat, so it could otherwise
	// point Prometheus anywhere. Only literal IP:port addresses inside
	// one are listed; link-local, multicast, unspecified, broadcast and
	// the clouds' metadata addresses never are (SDAllowPrefixes). Empty
	// = none.
	SDAllow []string `mapstructure:"sd_allow"`

	// Secrets from files (see Config.resolveSecrets).

	// TokenFile holds the token (one trailing newline dropped); it
	// overrides Token. "" = none.
	TokenFile string `mapstructure:"token_file"`
}

// Redis is where the frontier lives.
type Redis struct {
	// URL is a redis:// or rediss:// URL (redis://user:pass@host:port/db).
	URL string `mapstructure:"url"`
	// Cluster makes URL name Redis Cluster seed nodes:
	// redis://user:pass@host1:port?addr=host2:port&addr=host3:port.
	Cluster bool `mapstructure:"cluster"`
	// TLSCAFile, TLSCertFile, TLSKeyFile and TLSServerName tune the TLS of
	// a rediss:// URL: PEM CA bundle that verifies the server ("" = the
	// system's roots), client certificate and key (both or neither) and
	// the name checked in the server's certificate ("" = the host of each
	// address). Any of them with a redis:// URL is an error.
	TLSCAFile     string `mapstructure:"tls_ca_file"`
	TLSCertFile   string `mapstructure:"tls_cert_file"`
	TLSKeyFile    string `mapstructure:"tls_key_file"`
	TLSServerName string `mapstructure:"tls_server_name"`
	// AllowInsecure lets a password go in clear text (redis://) to an
	// address that is not loopback.
	AllowInsecure bool `mapstructure:"allow_insecure"`

	// Secrets from files (see Config.resolveSecrets).

	// PasswordFile holds the Redis password (one trailing newline
	// dropped); it overrides the password of URL, which may then name
	// only the user (redis://redcrawl-master-x@host:6379/0). "" = none.
	PasswordFile string `mapstructure:"password_file"`
	// StartupTimeout bounds the wait for Redis at start-up: a process that
	// cannot reach it within this time exits 1 naming redis.url (credentials
	// Redis refuses end it at once). An outage after a successful start is
	// a pause, however long. 0 = wait forever.
	StartupTimeout time.Duration `mapstructure:"startup_timeout"`
	// WaitReplicas is how many replicas must acknowledge a completion's,
	// a remote shard's links' and seeds' writes before the call returns,
	// when the node has replicas: a failover then loses no page. 0 = none.
	WaitReplicas int `mapstructure:"wait_replicas"`
	// WaitTimeout bounds one wait for replicas; one that times out is
	// counted and the crawl goes on.
	WaitTimeout time.Duration `mapstructure:"wait_timeout"`
}

// MySQL is where the master writes its logs.
type MySQL struct {
	// DSN is a go-sql-driver/mysql DSN. The master creates the database
	// named in it when it is missing.
	DSN string `mapstructure:"dsn"`
	// TLSCAFile, TLSCertFile, TLSKeyFile and TLSServerName: any of them set
	// turns on TLS (1.2 or later, the server verified): PEM CA bundle ("" =
	// the system's roots), client certificate and key (both or neither),
	// and the name checked in the server's certificate ("" = the DSN's
	// host).
	TLSCAFile     string `mapstructure:"tls_ca_file"`
	TLSCertFile   string `mapstructure:"tls_cert_file"`
	TLSKeyFile    string `mapstructure:"tls_key_file"`
	TLSServerName string `mapstructure:"tls_server_name"`
	// AllowInsecure lets a password go to a server that is not loopback
	// over a connection without verified TLS.
	AllowInsecure bool `mapstructure:"allow_insecure"`

	// Secrets and the migration user (see Config.resolveSecrets).

	// PasswordFile holds the password of DSN's user (one trailing newline
	// dropped); it overrides the DSN's password. "" = none.
	PasswordFile string `mapstructure:"password_file"`
	// MigrateDSN is a stronger user that only applies the migrations (and
	// creates the database when it is missing); it must name the same
	// database as DSN. "" = DSN does both.
	MigrateDSN string `mapstructure:"migrate_dsn"`
	// StartupTimeout bounds the wait for MySQL at start-up, as
	// Redis.StartupTimeout does for Redis. 0 = wait forever.
	StartupTimeout time.Duration `mapstructure:"startup_timeout"`
	// MigratePasswordFile holds the password of MigrateDSN's user; it
	// overrides MigrateDSN's password. "" = none.
	MigratePasswordFile string `mapstructure:"migrate_password_file"`
}

// Crawl names the crawl and its scope.
type Crawl struct {
	// Name names the crawl inside Redis keys and MySQL rows: 1 to 64 of
	// A-Z a-z 0-9 _ . -
	Name string `mapstructure:"name"`
	// MaxDepth is the largest link depth followed from a seed; 0 = unlimited.
	MaxDepth int `mapstructure:"max_depth"`
	// AllowHosts lists the hosts that may be fetched; empty = the seeds' hosts.
	AllowHosts []string `mapstructure:"allow_hosts"`
	// Allow, when not empty, keeps only URLs that match one of these regexes.
	Allow []string `mapstructure:"allow"`
	// Deny drops URLs that match any of these regexes (after Allow).
	Deny []string `mapstructure:"deny"`
	// StripParams are query parameters removed by canonicalization; a
	// trailing * matches a prefix (utm_*).
	StripParams []string `mapstructure:"strip_params"`
	// SortQuery sorts each URL's query parameters by name (stably) in its
	// canonical form, which is also the URL fetched; off keeps their order
	// (urlx.Options.SortQuery).
	SortQuery bool `mapstructure:"sort_query"`
	// MaxRedirects is the longest redirect chain followed from one URL.
	MaxRedirects int `mapstructure:"max_redirects"`
	// Strategy orders each host's queue: bfs (breadth-first), dfs
	// (depth-first), priority (link importance X·backlinks + Y·URL
	// importance) or aopic (on-line page importance: cash split among
	// out-links after a tax, so trap pages starve).
	Strategy string `mapstructure:"strategy"`
	// PriorityBacklinks and PriorityURL are X and Y of the priority
	// strategy's I(P) = X·IB(P) + Y·IL(P).
	PriorityBacklinks float64 `mapstructure:"priority_backlinks"`
	PriorityURL       float64 `mapstructure:"priority_url"`
	// AOPICTax is the share of a page's cash paid to the lambda page.
	AOPICTax float64 `mapstructure:"aopic_tax"`
	// UpwardPaths also enqueues every ancestor directory of a found URL.
	UpwardPaths bool `mapstructure:"upward_paths"`
	// MaxURLLength drops longer URLs (a trap defence).
	MaxURLLength int `mapstructure:"max_url_length"`
	// MaxPathRepeat drops URLs in which a path segment occurs more often.
	MaxPathRepeat int `mapstructure:"max_path_repeat"`
	// MaxPathSegments drops URLs with more path segments.
	MaxPathSegments int `mapstructure:"max_path_segments"`
	// MaxQueryParams drops URLs with more query parameters.
	MaxQueryParams int `mapstructure:"max_query_params"`
	// MaxPagesPerHost caps the URLs enqueued per host; 0 = unlimited.
	MaxPagesPerHost int64 `mapstructure:"max_pages_per_host"`
	// MaxQueryVariants caps the distinct query strings enqueued per path;
	// 0 = unlimited.
	MaxQueryVariants int `mapstructure:"max_query_variants"`
	// MaxDateVariants caps the URLs enqueued per path whose query holds a
	// date (?d=2026-11-24, ?date=20261124, ?month=2026-11): a calendar's
	// next-day links never end, where a listing's ?page=N does; 0 = they
	// count as any query variant.
	MaxDateVariants int `mapstructure:"max_date_variants"`
	// ContentDedup records pages whose body was already seen in the crawl
	// as duplicates and does not follow their links again.
	ContentDedup bool `mapstructure:"content_dedup"`
	// ObeyRobotsMeta obeys what pages say about themselves in robots meta
	// tags (<meta name="robots">, <meta name="<product token>">) and
	// X-Robots-Tag headers: noindex (not stored), nofollow (links not
	// followed), noarchive (no WARC record), none.
	ObeyRobotsMeta bool `mapstructure:"obey_robots_meta"`
	// ObeyRelNoFollow does not follow the links of <a>/<area> whose rel is
	// nofollow, ugc or sponsored.
	ObeyRelNoFollow bool `mapstructure:"obey_rel_nofollow"`
	// FollowCanonical enqueues a page's rel="canonical" URL when it is
	// another URL of the same host, and records the page as its duplicate.
	FollowCanonical bool `mapstructure:"follow_canonical"`
	// Schedule recrawls the crawl (every recorded page, then its recorded
	// seeds, fetched conditionally) on a cron expression or descriptor
	// (@daily, @every 6h); "" = never. Rule files may carry their own
	// schedule.
	Schedule string `mapstructure:"schedule"`
	// Shards splits the crawl into this many complete frontiers, each
	// under its own hash tag (crawl:{name:k}:…), so a Redis Cluster spreads
	// one crawl over its nodes; hosts are assigned to shards by jump
	// consistent hashing. Fixed when the crawl is created; 1 = one frontier.
	Shards int `mapstructure:"shards"`
	// MaxPages ends the crawl once this many pages were claimed for
	// fetching (retries count again), across every slave and shard and the
	// crawl's earlier runs; 0 = no limit. The master writes it to Redis when
	// it opens the crawl: a crawl ended by it goes on when run with a
	// higher one.
	MaxPages int64 `mapstructure:"max_pages"`
	// MaxItems ends the crawl once its pages gave this many items; 0 = no
	// limit.
	MaxItems int64 `mapstructure:"max_items"`
	// MaxDuration ends the crawl this long after its master started (each
	// run of master run or master crawl gets it anew); 0 = no limit.
	MaxDuration time.Duration `mapstructure:"max_duration"`
	// Sitemaps says which sitemaps are followed (docs/crawling.md "Sitemaps"):
	// "robots" those listed in robots.txt (Sitemap: lines), "seed" also each
	// seed host's /sitemap.xml, "off" none. A rule file's sitemaps key
	// overrides it for its site.
	Sitemaps string `mapstructure:"sitemaps"`
}

// Politeness binds every slave together towards one site.
type Politeness struct {
	// Delay is the least time between the starts of two requests to one host.
	Delay time.Duration `mapstructure:"delay"`
	// Jitter adds a uniform random extra wait of up to Jitter × Delay.
	Jitter float64 `mapstructure:"jitter"`
	// HostConcurrency is the number of requests in flight to one host across
	// all slaves.
	HostConcurrency int `mapstructure:"host_concurrency"`
	// ObeyRobots makes slaves fetch and obey robots.txt.
	ObeyRobots bool `mapstructure:"obey_robots"`
	// MaxCrawlDelay caps a robots.txt Crawl-delay.
	MaxCrawlDelay time.Duration `mapstructure:"max_crawl_delay"`
	// RobotsTTL is how long a fetched robots.txt is trusted.
	RobotsTTL time.Duration `mapstructure:"robots_ttl"`
	// JitterDist is the distribution of the random extra wait: uniform
	// (up to Jitter × Delay), exponential (mean Jitter × Delay, capped at
	// five times that) or none.
	JitterDist string `mapstructure:"jitter_dist"`
	// AutoThrottle adapts each host's delay to its observed latency
	// (Scrapy's AutoThrottle): delay = latency / AutoThrottleTarget,
	// clamped between Delay and AutoThrottleMaxDelay.
	AutoThrottle bool `mapstructure:"autothrottle"`
	// AutoThrottleTarget is the average number of requests in flight
	// to a host the throttle aims for.
	AutoThrottleTarget float64 `mapstructure:"autothrottle_target"`
	// AutoThrottleMaxDelay caps the adaptive delay.
	AutoThrottleMaxDelay time.Duration `mapstructure:"autothrottle_max_delay"`
}

// Lease governs claimed tasks.
type Lease struct {
	// Duration is how long a claim is held before the master takes it back.
	Duration time.Duration `mapstructure:"duration"`
	// MaxAttempts is how many times a task is tried before it is failed.
	MaxAttempts int `mapstructure:"max_attempts"`
	// RetryBase is the first retry backoff; it doubles with every attempt.
	RetryBase time.Duration `mapstructure:"retry_base"`
	// RetryMax caps the retry backoff (and a Retry-After header).
	RetryMax time.Duration `mapstructure:"retry_max"`
}

// Slave tunes one slave process.
type Slave struct {
	// Concurrency is the number of fetches in flight in one slave.
	Concurrency int `mapstructure:"concurrency"`
	// HeartbeatInterval is how often a slave reports to Redis.
	HeartbeatInterval time.Duration `mapstructure:"heartbeat_interval"`
	// ShutdownTimeout bounds a graceful leave: in-flight fetches that are not
	// done by then are given back.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// IdlePoll is the longest a slave waits before claiming again when no
	// host is ready: it waits for a work announcement or the next host's
	// time, and this is the backstop for a missed announcement.
	IdlePoll time.Duration `mapstructure:"idle_poll"`
	// Profile is a preset for small machines: "small" (a Raspberry Pi)
	// caps concurrency at 16, keeps bodies over 32 KiB on disk, turns
	// rendering off, caps LinkCache at 16384, and (bin/slave) sets a Go memory limit of 64 MiB unless
	// GOMEMLIMIT is set; "" = none. See SlaveProfile.
	Profile string `mapstructure:"profile"`
	// ProgressEvery is how often a slave logs a progress line (pages,
	// pages/s, errors, in flight); 0 = never.
	ProgressEvery time.Duration `mapstructure:"progress_every"`
	// MetricsListen is where a slave serves Prometheus /metrics (host:port;
	// port 0 picks a free port, reported in the heartbeat so the master's
	// /api/v1/sd lists it); "" = no metrics server.
	MetricsListen string `mapstructure:"metrics_listen"`
	// LinkCache is the number of slots (8 bytes each) of the slave's cache
	// of links already put through the crawl's seen set, which are then
	// not sent to Redis again (bfs and dfs); 0 = none.
	LinkCache int `mapstructure:"link_cache"`
	// MemoryLimit is bin/slave's soft Go memory limit in bytes (unless
	// GOMEMLIMIT is set); 0 = auto (SlaveMemoryLimit), -1 = none.
	MemoryLimit int64 `mapstructure:"memory_limit"`
	// API, with URLs, makes the slave a client of the master's work API.
	API SlaveAPI `mapstructure:"api"`
}

// Fetch tunes HTTP fetching.
type Fetch struct {
	// Timeout bounds one whole request. It may exceed Lease.Duration: a
	// slave extends the leases of the tasks it is still fetching.
	Timeout time.Duration `mapstructure:"timeout"`
	// MaxBodyBytes caps a body, counted on decompressed bytes.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// UserAgent is the User-Agent header and the agent matched in
	// robots.txt.
	UserAgent string `mapstructure:"user_agent"`
	// AllowPrivateNetworks lets slaves connect to loopback, private and
	// link-local addresses (tests, intranet crawls).
	AllowPrivateNetworks bool `mapstructure:"allow_private_networks"`
	// MemoryBodyBytes is the largest body kept in memory; larger bodies
	// spill to a temporary file.
	MemoryBodyBytes int64 `mapstructure:"memory_body_bytes"`
	// TempDir holds spilled bodies; "" = the system's temporary directory.
	TempDir string `mapstructure:"temp_dir"`
	// Proxies are proxy URLs (http, https, socks5, with credentials);
	// empty (and no ProxyFile) = direct connections.
	Proxies []string `mapstructure:"proxies"`
	// ProxyFile names a file of proxy URLs, one per line, re-read when it
	// changes.
	ProxyFile string `mapstructure:"proxy_file"`
	// UserAgents to rotate, one per session; empty = UserAgent.
	UserAgents []string `mapstructure:"user_agents"`
	// UserAgentFile names a file of user agents, one per line.
	UserAgentFile string `mapstructure:"user_agent_file"`
	// Cookies keeps a cookie jar per session.
	Cookies bool `mapstructure:"cookies"`
	// SessionsPerProxy is the number of sessions per proxy (or direct).
	SessionsPerProxy int `mapstructure:"sessions_per_proxy"`
	// StickyRequests is how many requests a host keeps its session for.
	StickyRequests int `mapstructure:"sticky_requests"`
	// BanStatuses are the HTTP statuses that mark a session as banned.
	BanStatuses []int `mapstructure:"ban_statuses"`
	// BanBodyRegex marks a session as banned when the body matches it
	// (a captcha page); "" = none.
	BanBodyRegex string `mapstructure:"ban_body_regex"`
	// ProxyCooldown is the first cooldown of a banned proxy; it doubles
	// per consecutive ban up to ProxyCooldownMax.
	ProxyCooldown    time.Duration `mapstructure:"proxy_cooldown"`
	ProxyCooldownMax time.Duration `mapstructure:"proxy_cooldown_max"`
	// ProxyMaxErrors retires a proxy or session after that many
	// consecutive errors or bans.
	ProxyMaxErrors int `mapstructure:"proxy_max_errors"`
	// SessionMaxUses retires a session after that many requests; 0 =
	// unlimited.
	SessionMaxUses int `mapstructure:"session_max_uses"`
	// ProxyPools are named lists of proxy URLs that rule files choose with
	// session.proxy_pool (names are lower-cased, as YAML keys are read).
	ProxyPools map[string][]string `mapstructure:"proxy_pools"`
}

// Rules locates the rule files.
type Rules struct {
	// Dir holds the rule files (*.yaml), one per site or group of sites;
	// "" = none.
	Dir string `mapstructure:"dir"`
	// Poll is how often the master looks for edits of the rule files.
	Poll time.Duration `mapstructure:"poll"`
}

// Render tunes headless-Chromium rendering on a slave.
type Render struct {
	// Enabled lets this slave render (and claim render tasks). A slave
	// without Chromium renders nothing whatever this says.
	Enabled bool `mapstructure:"enabled"`
	// ChromePath is the Chromium binary.
	ChromePath string `mapstructure:"chrome_path"`
	// Tabs is the number of pages rendered at once.
	Tabs int `mapstructure:"tabs"`
	// SnapshotDir keeps an HTML snapshot of each failed render; "" = none.
	SnapshotDir string `mapstructure:"snapshot_dir"`
	// MemoryBytes is the memory budget the resource governor shares among
	// fetch and render workers.
	MemoryBytes int64 `mapstructure:"memory_bytes"`
}

// DNS tunes the slaves' caching resolver.
type DNS struct {
	// Server is the DNS server (host:port) queried directly; "" = the
	// system's resolver.
	Server string `mapstructure:"server"`
	// MinTTL and MaxTTL clamp the TTLs of answers.
	MinTTL time.Duration `mapstructure:"min_ttl"`
	MaxTTL time.Duration `mapstructure:"max_ttl"`
	// NegativeTTL is how long a failed resolution is remembered.
	NegativeTTL time.Duration `mapstructure:"negative_ttl"`
	// SlowThreshold marks resolutions slower than this as slow.
	SlowThreshold time.Duration `mapstructure:"slow_threshold"`
	// Timeout bounds one query.
	Timeout time.Duration `mapstructure:"timeout"`
	// CacheSize is the number of entries of each cache; the entries of
	// hosts the slave holds leases for are kept beyond it (dnscache: Pin).
	CacheSize int `mapstructure:"cache_size"`
	// PrefetchWorkers bounds the resolver workers of pre-resolution.
	PrefetchWorkers int `mapstructure:"prefetch_workers"`
	// PrefetchLinks pre-resolves the hosts of the links a slave finds (into
	// free cache room). Off by default: with N slaves a slave fetches ~1/N
	// of them, so look-ahead multiplies the queries a resolver gets by up
	// to N; claim-time pre-resolution already covers every fetch.
	PrefetchLinks bool `mapstructure:"prefetch_links"`
}

// Storage says where slaves keep page bodies.
type Storage struct {
	// WARCDir is the directory of the slave's WARC files; "" = no WARC.
	WARCDir string `mapstructure:"warc_dir"`
	// WARCMaxFileBytes rotates a WARC file at this compressed size.
	WARCMaxFileBytes int64 `mapstructure:"warc_max_file_bytes"`
}

// Master tunes the master's components.
type Master struct {
	// DeadAfter is how long a slave may miss heartbeats before it is
	// declared dead and its tasks recovered.
	DeadAfter time.Duration `mapstructure:"dead_after"`
	// RecoverInterval is how often expired leases are looked for.
	RecoverInterval time.Duration `mapstructure:"recover_interval"`
	// Quiescence is how long a crawl must stay empty to be finished.
	Quiescence time.Duration `mapstructure:"quiescence"`
	// HeartbeatSample is how often slave heartbeats are sampled into MySQL.
	HeartbeatSample time.Duration `mapstructure:"heartbeat_sample"`
	// SinkBatch is the largest number of events inserted in one
	// transaction; a stream entry's events are never split, so a
	// transaction holds at least one entry's.
	SinkBatch int `mapstructure:"sink_batch"`
	// ShardLease is how long a master's hold on a shard lasts without
	// renewal (it renews every third of it): when a master dies, another
	// takes its shards after this long.
	ShardLease time.Duration `mapstructure:"shard_lease"`
}

// Dedup sizes the seen-URL store.
type Dedup struct {
	// ExpectedURLs sizes the Bloom filter (Mode bloom) when a crawl starts,
	// fixed for the crawl's life and allocated whole at once. Exact dedup
	// does not use it: its buckets grow with the crawl (crawls created
	// before they grew keep the bucket count it gave them).
	ExpectedURLs int64 `mapstructure:"expected_urls"`
	// Mode is exact (64-bit fingerprints in buckets that grow with the
	// crawl, ~9 bytes per URL) or bloom (a Bloom filter on Redis bitmaps
	// sized from ExpectedURLs and FalsePositiveRate, ~4 bytes per expected
	// URL; a false positive silently skips a page). Fixed for the crawl's
	// life.
	Mode string `mapstructure:"mode"`
	// FalsePositiveRate is the Bloom filter's target rate at ExpectedURLs.
	FalsePositiveRate float64 `mapstructure:"false_positive_rate"`
}

// Log sets up log/slog.
type Log struct {
	Level  string `mapstructure:"level"`  // debug, info, warn, error
	Format string `mapstructure:"format"` // text or json
}
