package config

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/viper"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

// writeConfig writes a YAML file in a fresh directory and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// asConfigError fails the test unless err is an *Error.
func asConfigError(t *testing.T, err error) *Error {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *config.Error", err, err)
	}
	return ce
}

func TestDefaultValidates(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

// TestDefaultSessionTTL: a dashboard login lasts 12 hours unless
// admin.session_ttl says otherwise.
func TestDefaultSessionTTL(t *testing.T) {
	if got := Default().Admin.SessionTTL; got != 12*time.Hour {
		t.Errorf("admin.session_ttl defaults to %v, want 12h", got)
	}
}

func TestDefaultReturnsFreshSlices(t *testing.T) {
	a := Default()
	a.Crawl.StripParams[0] = "changed"
	if b := Default(); b.Crawl.StripParams[0] != "utm_*" {
		t.Fatalf("Default() shares its slices: %q", b.Crawl.StripParams)
	}
}

func TestRepoConfigIsDefault(t *testing.T) {
	path := filepath.Join(testutil.RepoRoot(t), "config.yaml")
	got, err := load(path, nil)
	if err != nil {
		t.Fatalf("load(%s) = %v", path, err)
	}
	if diff := cmp.Diff(Default(), *got); diff != "" {
		t.Errorf("config.yaml differs from Default() (-default +file):\n%s", diff)
	}
}

// TestRepoConfigListsEveryKey makes sure config.yaml documents every key:
// a key missing from it would still load as its default.
func TestRepoConfigListsEveryKey(t *testing.T) {
	v := viper.New()
	v.SetConfigFile(filepath.Join(testutil.RepoRoot(t), "config.yaml"))
	if err := v.ReadInConfig(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for k := range keys.leaves {
		want = append(want, k)
	}
	sort.Strings(want)
	got := v.AllKeys()
	// viper lists no key for an empty mapping ("proxy_pools: {}"): look
	// for the map-valued keys in the text
	text, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for k, typ := range keys.leaves {
		section, name, _ := strings.Cut(k, ".")
		if typ.Kind() == reflect.Map && !slices.Contains(got, k) &&
			regexp.MustCompile(`(?m)^`+section+`:\n(?:(?:  .*|#.*|)\n)*?  `+name+`:`).Match(text) {
			got = append(got, k)
		}
	}
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config.yaml keys (-struct +file):\n%s", diff)
	}
}

func TestEveryKeyHasItsEnvName(t *testing.T) {
	if len(keys.env) != len(keys.leaves) {
		t.Fatalf("%d env names for %d keys: two keys share an env name", len(keys.env), len(keys.leaves))
	}
	for name, key := range keys.env {
		if want := "CRAWLER_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_")); name != want {
			t.Errorf("env name of %s = %s, want %s", key, name, want)
		}
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name string
		yaml string // "" = no file
		env  []string
		want func(c *Config)
	}{
		{name: "no file no env", want: func(*Config) {}},
		{name: "empty file", yaml: "\n", want: func(*Config) {}},
		{name: "null section keeps defaults", yaml: "redis:\n", want: func(*Config) {}},
		{
			name: "file values",
			yaml: `
crawl:
  name: shop-2024
  max_depth: 3
  allow_hosts: [example.com, "*.example.org"]
  deny: ['\.pdf$', 'logout']
politeness:
  delay: 250ms
  jitter: 0
  obey_robots: false
fetch:
  max_body_bytes: 512KiB
master:
  quiescence: 0.5s
`,
			want: func(c *Config) {
				c.Crawl.Name = "shop-2024"
				c.Crawl.MaxDepth = 3
				c.Crawl.AllowHosts = []string{"example.com", "*.example.org"}
				c.Crawl.Deny = []string{`\.pdf$`, "logout"}
				c.Politeness.Delay = 250 * time.Millisecond
				c.Politeness.Jitter = 0
				c.Politeness.ObeyRobots = false
				c.Fetch.MaxBodyBytes = 512 << 10
				c.Master.Quiescence = 500 * time.Millisecond
			},
		},
		{
			name: "dashboard session lifetime from env",
			env:  []string{"CRAWLER_ADMIN_SESSION_TTL=30m"},
			want: func(c *Config) { c.Admin.SessionTTL = 30 * time.Minute },
		},
		{
			name: "integer byte size and zero duration in file",
			yaml: "fetch:\n  max_body_bytes: 1048576\npoliteness:\n  delay: 0\n",
			want: func(c *Config) {
				c.Fetch.MaxBodyBytes = 1 << 20
				c.Politeness.Delay = 0
			},
		},
		{
			name: "keys are case-insensitive",
			yaml: "Politeness:\n  Delay: 2s\n",
			want: func(c *Config) { c.Politeness.Delay = 2 * time.Second },
		},
		{
			name: "env of every type",
			env: []string{
				"CRAWLER_POLITENESS_DELAY=250ms",                       // duration
				"CRAWLER_FETCH_ALLOW_PRIVATE_NETWORKS=true",            // bool
				"CRAWLER_SLAVE_CONCURRENCY=8",                          // int
				"CRAWLER_POLITENESS_JITTER=0.25",                       // float
				"CRAWLER_CRAWL_ALLOW_HOSTS=a.com, b.com",               // list
				"CRAWLER_ADMIN_SD_ALLOW=10.1.0.0/16, fd00::/8",         // cidr list
				"CRAWLER_FETCH_MAX_BODY_BYTES=1MB",                     // byte size
				"CRAWLER_DEDUP_EXPECTED_URLS=5000",                     // int64
				"CRAWLER_REDIS_URL=rediss://u:p@redis.internal:6380/2", // string
				"CRAWLER_CONFIG=/etc/redcrawl.yaml",                    // reserved, ignored
				"PATH=/usr/bin",                                        // not ours
			},
			want: func(c *Config) {
				c.Politeness.Delay = 250 * time.Millisecond
				c.Fetch.AllowPrivateNetworks = true
				c.Slave.Concurrency = 8
				c.Politeness.Jitter = 0.25
				c.Crawl.AllowHosts = []string{"a.com", "b.com"}
				c.Admin.SDAllow = []string{"10.1.0.0/16", "fd00::/8"}
				c.Fetch.MaxBodyBytes = 1_000_000
				c.Dedup.ExpectedURLs = 5000
				c.Redis.URL = "rediss://u:p@redis.internal:6380/2"
			},
		},
		{
			name: "fetch pipeline keys from env and file",
			yaml: "fetch:\n  proxies: [\"http://u:p@127.0.0.9:3128\"]\n  memory_body_bytes: 128KiB\ndns:\n  server: 127.0.0.1:5353\n",
			env: []string{
				"CRAWLER_FETCH_BAN_STATUSES=403, 429,503", // int list
				"CRAWLER_FETCH_USER_AGENTS=a/1,b/2",
				"CRAWLER_STORAGE_WARC_MAX_FILE_BYTES=64MiB",
				"CRAWLER_CRAWL_STRATEGY=aopic",
				"CRAWLER_DNS_PREFETCH_LINKS=true",
			},
			want: func(c *Config) {
				c.Fetch.Proxies = []string{"http://u:p@127.0.0.9:3128"}
				c.Fetch.MemoryBodyBytes = 128 << 10
				c.DNS.Server = "127.0.0.1:5353"
				c.Fetch.BanStatuses = []int{403, 429, 503}
				c.Fetch.UserAgents = []string{"a/1", "b/2"}
				c.Storage.WARCMaxFileBytes = 64 << 20
				c.Crawl.Strategy = "aopic"
				c.DNS.PrefetchLinks = true
			},
		},
		{
			name: "proxy pools and render from the file",
			yaml: "fetch:\n  proxy_pools:\n    Residential: [\"http://a:1\", \"socks5://b:2\"]\nrender:\n  enabled: false\n  tabs: 2\n  memory_bytes: 64MiB\nrules:\n  dir: /etc/redcrawl/rules\n",
			want: func(c *Config) {
				c.Fetch.ProxyPools = map[string][]string{"residential": {"http://a:1", "socks5://b:2"}}
				c.Render.Enabled = false
				c.Render.Tabs = 2
				c.Render.MemoryBytes = 64 << 20
				c.Rules.Dir = "/etc/redcrawl/rules"
			},
		},
		{
			name: "empty env int list is the empty list",
			env:  []string{"CRAWLER_FETCH_BAN_STATUSES="},
			want: func(c *Config) { c.Fetch.BanStatuses = []int{} },
		},
		{
			name: "sort_query from env and file",
			yaml: "crawl:\n  sort_query: false\n",
			env:  []string{"CRAWLER_CRAWL_SORT_QUERY=true"},
			want: func(c *Config) { c.Crawl.SortQuery = true },
		},
		{
			name: "empty env list is the empty list",
			env:  []string{"CRAWLER_CRAWL_STRIP_PARAMS="},
			want: func(c *Config) { c.Crawl.StripParams = []string{} },
		},
		{
			name: "env wins over file",
			yaml: "politeness:\n  delay: 2s\ncrawl:\n  deny: [a, b]\n",
			env:  []string{"CRAWLER_POLITENESS_DELAY=3s", "CRAWLER_CRAWL_DENY=c"},
			want: func(c *Config) {
				c.Politeness.Delay = 3 * time.Second
				c.Crawl.Deny = []string{"c"}
			},
		},
		{
			name: "last duplicate env wins",
			env:  []string{"CRAWLER_LOG_LEVEL=warn", "CRAWLER_LOG_LEVEL=debug"},
			want: func(c *Config) { c.Log.Level = "debug" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.yaml != "" {
				path = writeConfig(t, tt.yaml)
			}
			got, err := load(path, tt.env)
			if err != nil {
				t.Fatalf("load = %v", err)
			}
			want := Default()
			tt.want(&want)
			if diff := cmp.Diff(want, *got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		env     []string
		wantKey string
		wantMsg string // a substring of Error(), if not ""
	}{
		// Unknown keys.
		{name: "unknown nested key", yaml: "fetch:\n  time_out: 3s\n", wantKey: "fetch.time_out", wantMsg: "did you mean fetch.timeout?"},
		{name: "unknown section", yaml: "politness:\n  delay: 1s\n", wantKey: "politness", wantMsg: "did you mean politeness?"},
		{name: "unknown key far from any", yaml: "crawl:\n  zzzzzz: 1\n", wantKey: "crawl.zzzzzz", wantMsg: "unknown key in"},
		{name: "dotted unknown key", yaml: "fetch.time_out: 3s\n", wantKey: "fetch.time_out"},
		{name: "section given a scalar", yaml: "redis: redis://x\n", wantKey: "redis", wantMsg: "must be a mapping with keys url"},
		{name: "unknown env var", env: []string{"CRAWLER_POLITNESS_DELAY=1s"}, wantKey: "CRAWLER_POLITNESS_DELAY", wantMsg: "did you mean CRAWLER_POLITENESS_DELAY?"},
		{name: "env var naming a section", env: []string{"CRAWLER_FETCH=x"}, wantKey: "CRAWLER_FETCH"},
		{name: "empty non-list env var", env: []string{"CRAWLER_POLITENESS_OBEY_ROBOTS="}, wantKey: "CRAWLER_POLITENESS_OBEY_ROBOTS", wantMsg: "empty value"},

		// Values that do not decode.
		{name: "duration without unit", yaml: "politeness:\n  delay: 5\n", wantKey: "politeness.delay", wantMsg: "has no unit"},
		{name: "bad duration", yaml: "lease:\n  duration: soon\n", wantKey: "lease.duration", wantMsg: `invalid duration "soon"`},
		{name: "bad env duration names the var", env: []string{"CRAWLER_POLITENESS_DELAY=abc"}, wantKey: "politeness.delay", wantMsg: "(set by CRAWLER_POLITENESS_DELAY)"},
		{name: "fractional int", yaml: "crawl:\n  max_depth: 2.5\n", wantKey: "crawl.max_depth", wantMsg: "not an integer"},
		{name: "not an int", env: []string{"CRAWLER_SLAVE_CONCURRENCY=many"}, wantKey: "slave.concurrency", wantMsg: `cannot parse "many" as int`},
		{name: "not a bool", env: []string{"CRAWLER_POLITENESS_OBEY_ROBOTS=yes please"}, wantKey: "politeness.obey_robots"},
		{name: "dns.prefetch_links not a bool", yaml: "dns:\n  prefetch_links: sometimes\n", wantKey: "dns.prefetch_links"},
		{name: "bad byte size unit", yaml: "fetch:\n  max_body_bytes: 10XB\n", wantKey: "fetch.max_body_bytes", wantMsg: `unknown unit "XB"`},
		{name: "byte size units only for byte sizes", env: []string{"CRAWLER_DEDUP_EXPECTED_URLS=10MiB"}, wantKey: "dedup.expected_urls"},
		{name: "map for a string", yaml: "crawl:\n  name: {a: 1}\n", wantKey: "crawl.name"},

		// Values that decode but do not validate.
		{name: "redis url scheme", yaml: "redis:\n  url: http://127.0.0.1:6379\n", wantKey: "redis.url", wantMsg: "must be redis or rediss"},
		{name: "redis url unparsable", yaml: "redis:\n  url: \"redis://u:secret@[::1\"\n", wantKey: "redis.url"},
		{name: "redis bad db", env: []string{"CRAWLER_REDIS_URL=redis://h:6379/x"}, wantKey: "redis.url", wantMsg: "(set by CRAWLER_REDIS_URL)"},
		{name: "bad dsn", yaml: "mysql:\n  dsn: nonsense\n", wantKey: "mysql.dsn"},
		{name: "dsn without database", yaml: "mysql:\n  dsn: root@tcp(db:3306)/\n", wantKey: "mysql.dsn", wantMsg: "names no database"},
		{name: "crawl name with space", yaml: "crawl:\n  name: my crawl\n", wantKey: "crawl.name"},
		{name: "crawl name with colon", env: []string{"CRAWLER_CRAWL_NAME=a:b"}, wantKey: "crawl.name"},
		{name: "negative depth", yaml: "crawl:\n  max_depth: -1\n", wantKey: "crawl.max_depth"},
		{name: "allow host with scheme", yaml: "crawl:\n  allow_hosts: [ok.com, 'http://a.com']\n", wantKey: "crawl.allow_hosts[1]"},
		{name: "sd allow without prefix length", yaml: "admin:\n  sd_allow: [10.0.0.0/8, 10.0.0.7]\n", wantKey: "admin.sd_allow[1]", wantMsg: "one address as 10.0.0.7/32"},
		{name: "sd allow host name", env: []string{"CRAWLER_ADMIN_SD_ALLOW=prometheus.lan/24"}, wantKey: "admin.sd_allow[0]", wantMsg: "(set by CRAWLER_ADMIN_SD_ALLOW)"},
		{name: "sd allow ipv4-mapped", yaml: "admin:\n  sd_allow: ['::ffff:10.0.0.0/104']\n", wantKey: "admin.sd_allow[0]", wantMsg: "write its IPv4 range"},
		{name: "sd allow with zone", yaml: "admin:\n  sd_allow: ['fe80::%eth0/64']\n", wantKey: "admin.sd_allow[0]"},
		{name: "int list with a word", env: []string{"CRAWLER_FETCH_BAN_STATUSES=403,many"}, wantKey: "fetch.ban_statuses", wantMsg: `element 1 "many" is not an integer`},
		{name: "allow host with empty label", env: []string{"CRAWLER_CRAWL_ALLOW_HOSTS=a..com"}, wantKey: "crawl.allow_hosts[0]"},
		{name: "regex does not compile", yaml: "crawl:\n  deny: ['\\.pdf$', '(']\n", wantKey: "crawl.deny[1]", wantMsg: "invalid regex"},
		{name: "allow regex does not compile", env: []string{"CRAWLER_CRAWL_ALLOW=[a-"}, wantKey: "crawl.allow[0]", wantMsg: "(set by CRAWLER_CRAWL_ALLOW)"},
		{name: "empty regex from trailing comma", env: []string{"CRAWLER_CRAWL_DENY=a,"}, wantKey: "crawl.deny[1]", wantMsg: "empty regex"},
		{name: "empty strip param", yaml: "crawl:\n  strip_params: [a, '']\n", wantKey: "crawl.strip_params[1]"},
		{name: "strip param with inner star", yaml: "crawl:\n  strip_params: ['a*b']\n", wantKey: "crawl.strip_params[0]"},
		{name: "too many redirects", yaml: "crawl:\n  max_redirects: 21\n", wantKey: "crawl.max_redirects"},
		{name: "negative delay", yaml: "politeness:\n  delay: -1s\n", wantKey: "politeness.delay"},
		{name: "jitter too large", yaml: "politeness:\n  jitter: 11\n", wantKey: "politeness.jitter"},
		{name: "negative jitter", env: []string{"CRAWLER_POLITENESS_JITTER=-0.1"}, wantKey: "politeness.jitter"},
		{name: "host concurrency zero", yaml: "politeness:\n  host_concurrency: 0\n", wantKey: "politeness.host_concurrency"},
		{name: "negative max crawl delay", yaml: "politeness:\n  max_crawl_delay: -1s\n", wantKey: "politeness.max_crawl_delay"},
		{name: "zero robots ttl", yaml: "politeness:\n  robots_ttl: 0s\n", wantKey: "politeness.robots_ttl"},
		{name: "short lease", yaml: "lease:\n  duration: 500ms\n", wantKey: "lease.duration"},
		{name: "no attempts", yaml: "lease:\n  max_attempts: 0\n", wantKey: "lease.max_attempts"},
		{name: "zero retry base", yaml: "lease:\n  retry_base: 0s\n", wantKey: "lease.retry_base"},
		{name: "retry max below base", yaml: "lease:\n  retry_base: 1m\n  retry_max: 30s\n", wantKey: "lease.retry_max"},
		{name: "slave concurrency too large", yaml: "slave:\n  concurrency: 5000\n", wantKey: "slave.concurrency"},
		{name: "zero heartbeat", yaml: "slave:\n  heartbeat_interval: 0s\n", wantKey: "slave.heartbeat_interval"},
		{name: "heartbeat too slow for dead_after", yaml: "master:\n  dead_after: 4s\n", wantKey: "slave.heartbeat_interval", wantMsg: "master.dead_after"},
		{name: "negative redis startup timeout", yaml: "redis:\n  startup_timeout: -1s\n", wantKey: "redis.startup_timeout"},
		{name: "negative mysql startup timeout", yaml: "mysql:\n  startup_timeout: -5s\n", wantKey: "mysql.startup_timeout"},
		{name: "negative shutdown timeout", yaml: "slave:\n  shutdown_timeout: -1s\n", wantKey: "slave.shutdown_timeout"},
		{name: "zero idle poll", yaml: "slave:\n  idle_poll: 0s\n", wantKey: "slave.idle_poll"},
		{name: "zero fetch timeout", yaml: "fetch:\n  timeout: 0s\n", wantKey: "fetch.timeout"},
		{name: "zero body size", yaml: "fetch:\n  max_body_bytes: 0\n", wantKey: "fetch.max_body_bytes"},
		{name: "empty user agent", yaml: "fetch:\n  user_agent: ''\n", wantKey: "fetch.user_agent"},
		{name: "user agent with newline", yaml: "fetch:\n  user_agent: \"a\\r\\nX-Evil: 1\"\n", wantKey: "fetch.user_agent"},
		{name: "zero dead after", yaml: "master:\n  dead_after: 0s\n", wantKey: "master.dead_after"},
		{name: "zero recover interval", yaml: "master:\n  recover_interval: 0s\n", wantKey: "master.recover_interval"},
		{name: "zero quiescence", yaml: "master:\n  quiescence: 0s\n", wantKey: "master.quiescence"},
		{name: "zero heartbeat sample", yaml: "master:\n  heartbeat_sample: 0s\n", wantKey: "master.heartbeat_sample"},
		{name: "sink batch too large", yaml: "master:\n  sink_batch: 10001\n", wantKey: "master.sink_batch"},
		{name: "too few expected urls", yaml: "dedup:\n  expected_urls: 999\n", wantKey: "dedup.expected_urls"},
		{name: "bad log level", env: []string{"CRAWLER_LOG_LEVEL=verbose"}, wantKey: "log.level"},
		{name: "log level is case-sensitive", yaml: "log:\n  level: INFO\n", wantKey: "log.level"},
		{name: "bad log format", yaml: "log:\n  format: xml\n", wantKey: "log.format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.yaml != "" {
				path = writeConfig(t, tt.yaml)
			}
			c, err := load(path, tt.env)
			if err == nil {
				t.Fatalf("load = %+v, want an error for %s", c, tt.wantKey)
			}
			t.Log(err)
			ce := asConfigError(t, err)
			if ce.Key != tt.wantKey {
				t.Errorf("Key = %q, want %q (error: %v)", ce.Key, tt.wantKey, err)
			}
			if !strings.HasPrefix(err.Error(), "config: "+tt.wantKey+": ") {
				t.Errorf("error %q does not start with config: %s: ", err, tt.wantKey)
			}
			if tt.wantMsg != "" && !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q leaks a password", err)
			}
			if got := ExitCode(err); got != 2 {
				t.Errorf("ExitCode = %d, want 2", got)
			}
		})
	}
}

// TestValidate covers what a file cannot express.
func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(c *Config)
		wantKey string
	}{
		{"NaN jitter", func(c *Config) { c.Politeness.Jitter = math.NaN() }, "politeness.jitter"},
		{"user agent with NUL", func(c *Config) { c.Fetch.UserAgent = "a\x00b" }, "fetch.user_agent"},
		{"unix redis url", func(c *Config) { c.Redis.URL = "unix:///tmp/redis.sock" }, "redis.url"},
		{"dsn with unsafe database name", func(c *Config) { c.MySQL.DSN = "root@tcp(db:3306)/a`b" }, "mysql.dsn"},
		{"empty crawl name", func(c *Config) { c.Crawl.Name = "" }, "crawl.name"},
		{"crawl name too long", func(c *Config) { c.Crawl.Name = strings.Repeat("a", 65) }, "crawl.name"},
		{"host label too long", func(c *Config) { c.Crawl.AllowHosts = []string{strings.Repeat("a", 64) + ".com"} }, "crawl.allow_hosts[0]"},
		{"bare wildcard host", func(c *Config) { c.Crawl.AllowHosts = []string{"*."} }, "crawl.allow_hosts[0]"},
		{"host with port", func(c *Config) { c.Crawl.AllowHosts = []string{"a.com:8080"} }, "crawl.allow_hosts[0]"},
		{"unicode host", func(c *Config) { c.Crawl.AllowHosts = []string{"bücher.de"} }, "crawl.allow_hosts[0]"},
		{"bare star would strip every param", func(c *Config) { c.Crawl.StripParams = []string{"utm_*", "*"} }, "crawl.strip_params[1]"},
		{"star inside a param", func(c *Config) { c.Crawl.StripParams = []string{"a*b"} }, "crawl.strip_params[0]"},
		{"unknown strategy", func(c *Config) { c.Crawl.Strategy = "random" }, "crawl.strategy"},
		{"unknown sitemaps mode", func(c *Config) { c.Crawl.Sitemaps = "always" }, "crawl.sitemaps"},
		{"aopic tax of 1", func(c *Config) { c.Crawl.AOPICTax = 1 }, "crawl.aopic_tax"},
		{"tiny max url length", func(c *Config) { c.Crawl.MaxURLLength = 10 }, "crawl.max_url_length"},
		{"unknown jitter dist", func(c *Config) { c.Politeness.JitterDist = "normal" }, "politeness.jitter_dist"},
		{"throttle cap below delay", func(c *Config) { c.Politeness.AutoThrottleMaxDelay = time.Millisecond }, "politeness.autothrottle_max_delay"},
		{"ftp proxy", func(c *Config) { c.Fetch.Proxies = []string{"http://a:1", "ftp://p:21"} }, "fetch.proxies[1]"},
		{"proxy without host", func(c *Config) { c.Fetch.Proxies = []string{"socks5://"} }, "fetch.proxies[0]"},
		{"empty user agent in list", func(c *Config) { c.Fetch.UserAgents = []string{""} }, "fetch.user_agents[0]"},
		{"ban status out of range", func(c *Config) { c.Fetch.BanStatuses = []int{403, 9999} }, "fetch.ban_statuses[1]"},
		{"bad ban regex", func(c *Config) { c.Fetch.BanBodyRegex = "(captcha" }, "fetch.ban_body_regex"},
		{"cooldown max below cooldown", func(c *Config) { c.Fetch.ProxyCooldownMax = time.Second }, "fetch.proxy_cooldown_max"},
		{"empty proxy pool", func(c *Config) { c.Fetch.ProxyPools = map[string][]string{"a": {}} }, "fetch.proxy_pools.a"},
		{"bad proxy in a pool", func(c *Config) { c.Fetch.ProxyPools = map[string][]string{"a": {"ftp://x:1"}} }, "fetch.proxy_pools.a[0]"},
		{"render without chrome", func(c *Config) { c.Render.ChromePath = "" }, "render.chrome_path"},
		{"zero render tabs", func(c *Config) { c.Render.Tabs = 0 }, "render.tabs"},
		{"dns server without port", func(c *Config) { c.DNS.Server = "127.0.0.53" }, "dns.server"},
		{"dns max ttl below min", func(c *Config) { c.DNS.MaxTTL = time.Second }, "dns.max_ttl"},
		{"tiny warc files", func(c *Config) { c.Storage.WARCMaxFileBytes = 1000 }, "storage.warc_max_file_bytes"},
		{"no dashboard session", func(c *Config) { c.Admin.SessionTTL = 0 }, "admin.session_ttl"},
		{"dashboard session of seconds", func(c *Config) { c.Admin.SessionTTL = 59 * time.Second }, "admin.session_ttl"},
		{"dashboard session past 30 days", func(c *Config) { c.Admin.SessionTTL = 721 * time.Hour }, "admin.session_ttl"},
		{"work API without TLS", func(c *Config) { c.API.Listen = "0.0.0.0:8443" }, "api.tls_cert"},
		{"work API in clear text off loopback", func(c *Config) { c.API.Listen = "10.0.0.5:8443"; c.API.AllowInsecure = true }, "api.allow_insecure"},
		{"work API listen without port", func(c *Config) { c.API.Listen = "127.0.0.1" }, "api.listen"},
		{"work API cert without key", func(c *Config) {
			c.API.Listen, c.API.TLSCert = "127.0.0.1:8443", "/etc/redcrawl/tls/api.crt"
		}, "api.tls_key"},
		{"no leases in flight", func(c *Config) { c.API.MaxInFlight = 0 }, "api.max_in_flight"},
		{"no rate", func(c *Config) { c.API.Rate = 0 }, "api.rate"},
		{"NaN rate", func(c *Config) { c.API.Rate = math.NaN() }, "api.rate"},
		{"tiny body", func(c *Config) { c.API.MaxBody = 1000 }, "api.max_body"},
		{"links past a sitemap's", func(c *Config) { c.API.MaxLinks = 50001 }, "api.max_links"},
		{"a slave API URL of no form", func(c *Config) {
			c.Slave.API.URLs, c.Slave.API.TokenFile = []string{"https://m1:8443", "m2:8443"}, "/t"
		}, "slave.api.urls[1]"},
		{"a slave API URL with a path", func(c *Config) {
			c.Slave.API.URLs, c.Slave.API.TokenFile = []string{"https://m1:8443/work"}, "/t"
		}, "slave.api.urls[0]"},
		{"a slave API URL in clear text to a remote master", func(c *Config) {
			c.Slave.API.URLs, c.Slave.API.TokenFile = []string{"http://10.0.0.5:8443"}, "/t"
		}, "slave.api.urls[0]"},
		{"a slave of the API without its token", func(c *Config) { c.Slave.API.URLs = []string{"https://m1:8443"} }, "slave.api.token_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want an error for %s", tt.wantKey)
			}
			if ce := asConfigError(t, err); ce.Key != tt.wantKey {
				t.Errorf("Key = %q, want %q (error: %v)", ce.Key, tt.wantKey, err)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
	}{
		{"wildcard and plain hosts", func(c *Config) {
			c.Crawl.AllowHosts = []string{"*.example.com", "Example.ORG", "127.0.0.1", "my_host.internal", "xn--bcher-kva.de"}
		}},
		{"session-token qualified params", func(c *Config) { c.Crawl.StripParams = []string{"sid=<token>", "s_*=<token>"} }},
		{"no strip params", func(c *Config) { c.Crawl.StripParams = []string{} }},
		{"fetch timeout above lease", func(c *Config) { c.Fetch.Timeout = 5 * time.Minute }},
		{"zero delay and jitter bounds", func(c *Config) { c.Politeness.Delay = 0; c.Politeness.Jitter = 10 }},
		{"rediss with password", func(c *Config) { c.Redis.URL = "rediss://user:pw@redis:6380/3" }},
		{"dsn with password and params", func(c *Config) { c.MySQL.DSN = "u:p@tcp(db:3306)/crawl_01?parseTime=true&loc=UTC&tls=true" }},
		{"tab in user agent", func(c *Config) { c.Fetch.UserAgent = "a\tb" }},
		{"shortest dashboard session", func(c *Config) { c.Admin.SessionTTL = time.Minute }},
		{"longest dashboard session", func(c *Config) { c.Admin.SessionTTL = 720 * time.Hour }},
		{"every proxy scheme with credentials", func(c *Config) {
			c.Fetch.Proxies = []string{"http://u:p@p1:3128", "https://p2:443", "socks5://u:p@p3:1080", "socks5h://p4:1080/"}
		}},
		{"dfs with a dns server", func(c *Config) { c.Crawl.Strategy = "dfs"; c.DNS.Server = "[::1]:53" }},
		{"work API in clear text on loopback", func(c *Config) { c.API.Listen = "127.0.0.1:8443"; c.API.AllowInsecure = true }},
		{"a slave of two masters' APIs", func(c *Config) {
			c.Slave.API.URLs, c.Slave.API.TokenFile = []string{"https://m1.example:8443", "https://[2001:db8::1]:8443/"}, "/t"
		}},
		{"a slave of a loopback API in clear text", func(c *Config) {
			c.Slave.API.URLs, c.Slave.API.TokenFile = []string{"http://127.0.0.1:8443"}, "/t"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
		})
	}
}

func TestMalformedYAML(t *testing.T) {
	path := writeConfig(t, "redis:\n  url: [unclosed\n")
	_, err := load(path, nil)
	ce := asConfigError(t, err)
	if ce.Key != "" {
		t.Errorf("Key = %q, want none for a file-level error", ce.Key)
	}
	if want := "config: " + path + ": malformed yaml: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
	if strings.Contains(err.Error(), "While parsing") {
		t.Errorf("error %q keeps viper's prefix", err)
	}
	if got := ExitCode(err); got != 2 {
		t.Errorf("ExitCode = %d, want 2", got)
	}
}

func TestTopLevelListIsMalformed(t *testing.T) {
	path := writeConfig(t, "- a\n- b\n")
	_, err := load(path, nil)
	if ce := asConfigError(t, err); ce.Key != "" || !strings.Contains(err.Error(), path) {
		t.Errorf("error %q: want a file-level error naming %s", err, path)
	}
}

func TestMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(path) // the file is read before the environment
	ce := asConfigError(t, err)
	if ce.Key != "" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("error %v: want a file-level error wrapping fs.ErrNotExist", err)
	}
	if want := "config: " + path + ": cannot read: "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
	if n := strings.Count(err.Error(), path); n != 1 {
		t.Errorf("error %q names the path %d times", err, n)
	}
}

func TestErrorString(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Key: "politeness.delay", Msg: "-1s must be >= 0"}, "config: politeness.delay: -1s must be >= 0"},
		{&Error{Msg: "/etc/c.yaml: malformed yaml", Err: errors.New("yaml: line 2: oops")}, "config: /etc/c.yaml: malformed yaml: yaml: line 2: oops"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"config error", &Error{Key: "log.level", Msg: "bad"}, 2},
		{"wrapped config error", fmt.Errorf("master: %w", &Error{Key: "log.level", Msg: "bad"}), 2},
		{"other error", errors.New("redis: connection refused"), 1},
		{"wrapped other error", fmt.Errorf("run: %w", os.ErrDeadlineExceeded), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "10485760", want: 10485760},
		{in: "10MiB", want: 10 << 20},
		{in: "512KiB", want: 512 << 10},
		{in: "1MB", want: 1_000_000},
		{in: "1 kb", want: 1000},
		{in: "2gib", want: 2 << 30},
		{in: "1.5MiB", want: 3 << 19},
		{in: "100B", want: 100},
		{in: " 7 ", want: 7},
		{in: "-1KiB", want: -1024}, // Validate rejects it, naming the key
		{in: "", wantErr: true},
		{in: "MiB", wantErr: true},
		{in: "10M", wantErr: true}, // ambiguous: MB or MiB?
		{in: "1e3", wantErr: true},
		{in: "NaN", wantErr: true},
		{in: "0x10", wantErr: true},
		{in: "9999999TiB", wantErr: true},
		{in: "9223372036854775808", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseByteSize(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestSlogLevel(t *testing.T) {
	for level, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError,
	} {
		c := Default()
		c.Log.Level = level
		if got := c.SlogLevel(); got != want {
			t.Errorf("SlogLevel(%q) = %v, want %v", level, got, want)
		}
	}
}

func TestRedisOptions(t *testing.T) {
	c := Default()
	opt, err := c.RedisOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opt.Addr != "127.0.0.1:6379" || opt.DB != 0 {
		t.Errorf("RedisOptions() = addr %q db %d, want 127.0.0.1:6379 db 0", opt.Addr, opt.DB)
	}

	c.Redis.URL = "redis://user:secret@host:6380/x"
	_, err = c.RedisOptions()
	if ce := asConfigError(t, err); ce.Key != "redis.url" {
		t.Errorf("Key = %q, want redis.url", ce.Key)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q leaks the password", err)
	}
}

func TestEditDistanceSuggestions(t *testing.T) {
	sections := slices.Clone(keys.sections[""])
	if got := closest("politness", sections); got != "politeness" {
		t.Errorf("closest(politness) = %q", got)
	}
	if got := closest("nothinglikeit", sections); got != "" {
		t.Errorf("closest(nothinglikeit) = %q, want none", got)
	}
}

func TestSlaveProfile(t *testing.T) {
	c := Default()
	c.Slave.Profile = "small"
	c.Slave.Concurrency = 64
	p := c.SlaveProfile()
	if p.Slave.Concurrency != 16 || p.Render.Enabled || p.Fetch.MemoryBodyBytes != 32<<10 {
		t.Errorf("small profile: concurrency %d, render %v, memory body %d", p.Slave.Concurrency, p.Render.Enabled, p.Fetch.MemoryBodyBytes)
	}
	if c.Slave.Concurrency != 64 || !c.Render.Enabled {
		t.Error("SlaveProfile changed its receiver")
	}
	c.Slave.Profile = ""
	if p := c.SlaveProfile(); p.Slave.Concurrency != 64 || !p.Render.Enabled {
		t.Error("no profile changed the config")
	}
}

func TestSlaveMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want int64
	}{
		{"auto, rendering on", "", 24<<20 + 32*(64<<10) + 4*(32<<20)},
		{"auto, no rendering, 64 in flight", "slave:\n  concurrency: 64\nrender:\n  enabled: false\n", 28 << 20},
		{"auto, bigger bodies in memory", "slave:\n  concurrency: 64\nfetch:\n  memory_body_bytes: 1MiB\nrender:\n  enabled: false\n", 24<<20 + 64*(1<<20)},
		{"small profile", "slave:\n  profile: small\n", 64 << 20},
		{"explicit size", "slave:\n  memory_limit: 48MiB\n", 48 << 20},
		{"none", "slave:\n  memory_limit: -1\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.SlaveMemoryLimit(); got != tc.want {
				t.Errorf("limit %d, want %d", got, tc.want)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("slave:\n  memory_limit: 1MiB\n"), 0o644)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "slave.memory_limit") {
		t.Errorf("1MiB limit: %v, want an error naming slave.memory_limit", err)
	}
}
