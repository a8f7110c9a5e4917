package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/redcrawl/redcrawl/shared/suggest"
)

// EnvPrefix starts the name of every environment variable that overrides a
// key: CRAWLER_ + the key path upper-cased with "." replaced by "_"
// (politeness.delay → CRAWLER_POLITENESS_DELAY).
const EnvPrefix = "CRAWLER_"

// EnvConfigFile is the one CRAWLER_ variable that names no key. Load ignores
// it; mains may use it to name the config file.
const EnvConfigFile = EnvPrefix + "CONFIG"

// Default returns the configuration used for every key that neither the file
// nor the environment sets. Each call returns fresh slices.
func Default() Config {
	return Config{
		Redis: Redis{URL: "redis://127.0.0.1:6379/0", Cluster: false, PasswordFile: "", StartupTimeout: 30 * time.Second,
			WaitReplicas: 1, WaitTimeout: time.Second},
		MySQL: MySQL{DSN: "root@tcp(127.0.0.1:3306)/crawler?parseTime=true", PasswordFile: "",
			MigrateDSN: "", MigratePasswordFile: "", StartupTimeout: 30 * time.Second},
		Crawl: Crawl{
			Name:       "default",
			MaxDepth:   0,
			AllowHosts: []string{},
			Allow:      []string{},
			Deny:       []string{},
			// urlx.DefaultStripParams: tracking and session-id parameters
			StripParams: []string{
				"utm_*", "gclid", "fbclid", "mc_cid", "mc_eid", "_ga", "yclid", "msclkid", "igshid",
				"phpsessid", "_phpsessid", "sessionid", "_sessionid", "jsessionid", "_jsessionid",
				"lsessionid", "_lsessionid", "bv_sessionid", "_bv_sessionid",
				"aspsessionid*", "cfid", "cftoken", "oscsid", "zenid",
				"sid=<token>", "_sid=<token>",
			},
			SortQuery:         false,
			MaxRedirects:      5,
			Strategy:          "bfs",
			PriorityBacklinks: 1,
			PriorityURL:       1,
			AOPICTax:          0.1,
			UpwardPaths:       false,
			MaxURLLength:      2048,
			MaxPathRepeat:     2,
			MaxPathSegments:   32,
			MaxQueryParams:    20,
			MaxPagesPerHost:   1_000_000,
			MaxQueryVariants:  1000,
			MaxDateVariants:   100,
			ContentDedup:      true,
			ObeyRobotsMeta:    true,
			ObeyRelNoFollow:   false,
			FollowCanonical:   false,
			Schedule:          "",
			Shards:            1,
			MaxPages:          0,
			MaxItems:          0,
			MaxDuration:       0,
			Sitemaps:          "robots",
		},
		Politeness: Politeness{
			Delay:                time.Second,
			Jitter:               0.5,
			HostConcurrency:      1,
			ObeyRobots:           true,
			MaxCrawlDelay:        30 * time.Second,
			RobotsTTL:            24 * time.Hour,
			JitterDist:           "uniform",
			AutoThrottle:         false,
			AutoThrottleTarget:   1,
			AutoThrottleMaxDelay: time.Minute,
		},
		Lease: Lease{
			Duration:    60 * time.Second,
			MaxAttempts: 3,
			RetryBase:   time.Second,
			RetryMax:    10 * time.Minute,
		},
		Slave: Slave{
			Concurrency:       32,
			HeartbeatInterval: 2 * time.Second,
			ShutdownTimeout:   15 * time.Second,
			IdlePoll:          2 * time.Second,
			Profile:           "",
			ProgressEvery:     10 * time.Second,
			MetricsListen:     "127.0.0.1:0",
			LinkCache:         1 << 17,
			MemoryLimit:       0,
			API:               SlaveAPI{URLs: []string{}},
		},
		Fetch: Fetch{
			Timeout:              30 * time.Second,
			MaxBodyBytes:         10 << 20,
			UserAgent:            "redcrawl/0.1 (+https://github.com/redcrawl/redcrawl)",
			AllowPrivateNetworks: false,
			MemoryBodyBytes:      64 << 10,
			TempDir:              "",
			Proxies:              []string{},
			ProxyFile:            "",
			UserAgents:           []string{},
			UserAgentFile:        "",
			Cookies:              false,
			SessionsPerProxy:     4,
			StickyRequests:       20,
			BanStatuses:          []int{403, 429},
			BanBodyRegex:         "",
			ProxyCooldown:        30 * time.Second,
			ProxyCooldownMax:     10 * time.Minute,
			ProxyMaxErrors:       5,
			SessionMaxUses:       500,
			ProxyPools:           map[string][]string{},
		},
		Master: Master{
			DeadAfter:       10 * time.Second,
			RecoverInterval: time.Second,
			Quiescence:      500 * time.Millisecond,
			HeartbeatSample: 30 * time.Second,
			ShardLease:      10 * time.Second,
			SinkBatch:       500,
		},
		DNS: DNS{
			Server:          "",
			MinTTL:          30 * time.Second,
			MaxTTL:          time.Hour,
			NegativeTTL:     time.Minute,
			SlowThreshold:   2 * time.Second,
			Timeout:         5 * time.Second,
			CacheSize:       100000,
			PrefetchWorkers: 16,
			PrefetchLinks:   false,
		},
		Storage: Storage{WARCDir: "", WARCMaxFileBytes: 1 << 30},
		Rules:   Rules{Dir: "rules", Poll: 2 * time.Second},
		Render: Render{Enabled: true, ChromePath: "/usr/bin/chromium", Tabs: 4, SnapshotDir: "",
			MemoryBytes: 256 << 20},
		Dedup: Dedup{ExpectedURLs: 10_000_000, Mode: "exact", FalsePositiveRate: 1e-6},
		Log:   Log{Level: "info", Format: "text"},
		Admin: Admin{Listen: "127.0.0.1:8080", Token: "", PublicRead: false, TokenFile: "", SessionTTL: 12 * time.Hour,
			// loopback and the private ranges: RFC 1918, IPv6 unique local
			SDAllow: []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"}},
		API: API{MaxInFlight: 256, Rate: 1000, MaxBody: 16 << 20, MaxLinks: 50000, EventRate: 4 << 20,
			MaxStream: 64 << 20, DecodeBudget: 32 << 20},
	}
}

// Load builds the configuration from Default(), then the YAML file at path
// (none when path is ""), then the CRAWLER_* environment variables, and
// validates it. A key in the file or an environment variable that matches
// no key is an error, so that a typo is not silently ignored.
//
// A list-valued key set from the environment takes a comma-separated value
// (CRAWLER_CRAWL_ALLOW_HOSTS=a.com,b.com; empty = empty list), so a regex
// with a comma in it can only be given in the file. Any other key set to
// the empty string is an error: unset the variable to keep the file's or
// the default value.
//
// Every error is an *Error.
func Load(path string) (*Config, error) {
	return load(path, os.Environ())
}

// load is Load with the environment ("NAME=value" entries) as an argument.
//
// Viper holds the layers: the file, then the CRAWLER_ variables found in
// environ as its override layer (Set: AutomaticEnv reads only the process
// environment), and decodes them with the hooks below onto Default(), so
// that a key neither sets keeps its default. ZeroFields makes a list or a
// map the file or a variable gives replace the default, not merge into it.
func load(path string, environ []string) (*Config, error) {
	v := viper.New()
	v.SetConfigType("yaml")
	if path != "" {
		if err := readFile(v, path); err != nil {
			return nil, err
		}
	}
	fromEnv, err := applyEnv(v, environ)
	if err != nil {
		return nil, err
	}

	c := Default()
	hook := mapstructure.ComposeDecodeHookFunc(
		durationHook,
		listHook,
		byteSizeHook(&c.Fetch.MaxBodyBytes, &c.Fetch.MemoryBodyBytes, &c.Storage.WARCMaxFileBytes,
			&c.Render.MemoryBytes, &c.Slave.MemoryLimit, &c.API.EventRate, &c.API.MaxStream, &c.API.DecodeBudget),
		integerHook,
	)
	if err := v.UnmarshalExact(&c, viper.DecodeHook(hook), func(dc *mapstructure.DecoderConfig) { dc.ZeroFields = true }); err != nil {
		return nil, withSource(decodeError(err), fromEnv)
	}
	if err := c.Validate(); err != nil {
		return nil, withSource(err, fromEnv)
	}
	return &c, nil
}

// readFile reads the YAML file at path into v and checks that it sets
// only known keys (AllSettings lower-cases them, as viper matches them).
func readFile(v *viper.Viper, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is already in Msg
		}
		return &Error{Msg: path + ": cannot read", Err: err}
	}
	if err := v.ReadConfig(bytes.NewReader(b)); err != nil {
		var pe viper.ConfigParseError
		if errors.As(err, &pe) {
			err = pe.Unwrap() // drop viper's "While parsing config:"
		}
		return &Error{Msg: path + ": malformed yaml", Err: err}
	}
	return checkKeys(v.AllSettings(), "", path)
}

// schema describes the keys of Config.
type schema struct {
	leaves   map[string]reflect.Type // "politeness.delay" → time.Duration
	sections map[string][]string     // "" → [redis mysql ...], "redis" → [url]
	env      map[string]string       // "CRAWLER_POLITENESS_DELAY" → "politeness.delay"
}

var keys = buildSchema()

func buildSchema() schema {
	s := schema{
		leaves:   map[string]reflect.Type{},
		sections: map[string][]string{},
		env:      map[string]string{},
	}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		s.sections[prefix] = []string{}
		for f := range t.Fields() {
			name := tagName(f)
			key := join(prefix, name)
			s.sections[prefix] = append(s.sections[prefix], name)
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, key)
				continue
			}
			s.leaves[key] = f.Type
			s.env[envName(key)] = key
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return s
}

// tagName is the key of a struct field: its mapstructure tag, else its name
// in lower case (as mapstructure matches it).
func tagName(f reflect.StructField) string {
	if n, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ","); n != "" {
		return n
	}
	return strings.ToLower(f.Name)
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// envName is the environment variable that overrides key.
func envName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// checkKeys rejects a key of the file settings m (under prefix) that is not
// in the schema, or a section that is not a mapping.
func checkKeys(m map[string]any, prefix, path string) error {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		key := join(prefix, name)
		if _, ok := keys.leaves[key]; ok {
			continue // a wrong type is reported when decoding
		}
		if _, ok := keys.sections[key]; ok {
			switch sub := m[name].(type) {
			case nil:
			case map[string]any:
				if err := checkKeys(sub, key, path); err != nil {
					return err
				}
			default:
				return &Error{Key: key, Msg: fmt.Sprintf("must be a mapping with keys %s, not a %T (in %s)",
					strings.Join(keys.sections[key], ", "), sub, path)}
			}
			continue
		}
		msg := "unknown key in " + path
		if s := closest(name, keys.sections[prefix]); s != "" {
			msg += "; did you mean " + join(prefix, s) + "?"
		}
		return &Error{Key: key, Msg: msg}
	}
	return nil
}

// applyEnv sets in v every key named by a CRAWLER_ variable of environ and
// returns which variable set each key.
func applyEnv(v *viper.Viper, environ []string) (map[string]string, error) {
	vars := map[string]string{}
	for _, kv := range environ {
		name, value, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(name, EnvPrefix) && name != EnvConfigFile {
			vars[name] = value // the last of duplicates wins, as in getenv
		}
	}
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	sort.Strings(names)

	fromEnv := map[string]string{}
	for _, name := range names {
		key, ok := keys.env[name]
		if !ok {
			msg := "unknown environment variable: it names no config key"
			if s := closestEnv(name); s != "" {
				msg += "; did you mean " + s + "?"
			}
			return nil, &Error{Key: name, Msg: msg}
		}
		value := vars[name]
		if strings.TrimSpace(value) == "" && keys.leaves[key].Kind() != reflect.Slice {
			return nil, &Error{Key: name, Msg: "empty value; unset the variable to keep the file's or the default value of " + key}
		}
		v.Set(key, value)
		fromEnv[key] = name
	}
	return fromEnv, nil
}

// closest returns the candidate nearest to name by edit distance, if it is
// near enough to be a typo.
func closest(name string, candidates []string) string {
	best, bestD := "", 3 // at most 2 edits
	for _, c := range candidates {
		if d := suggest.Distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func closestEnv(name string) string {
	names := make([]string, 0, len(keys.env))
	for n := range keys.env {
		names = append(names, n)
	}
	sort.Strings(names)
	return closest(name, names)
}

// decodeError turns a mapstructure error into an *Error naming the key of
// the first field that failed.
func decodeError(err error) error {
	de := firstDecodeError(err)
	if de == nil {
		return &Error{Msg: "cannot decode", Err: err}
	}
	inner := de.Unwrap()
	msg := inner.Error()
	var pe *mapstructure.ParseError
	if errors.As(inner, &pe) {
		msg = fmt.Sprintf("cannot parse %q as %s", fmt.Sprint(pe.Value), pe.Expected.Type())
		if pe.Err != nil {
			msg += ": " + pe.Err.Error()
		}
	}
	return &Error{Key: de.Name(), Msg: msg}
}

// firstDecodeError finds the first *mapstructure.DecodeError in err's tree
// that holds no other one (the innermost, with the full key).
func firstDecodeError(err error) *mapstructure.DecodeError {
	switch e := err.(type) {
	case nil:
		return nil
	case *mapstructure.DecodeError:
		if inner := firstDecodeError(e.Unwrap()); inner != nil {
			return inner
		}
		return e
	case interface{ Unwrap() []error }:
		for _, sub := range e.Unwrap() {
			if de := firstDecodeError(sub); de != nil {
				return de
			}
		}
		return nil
	default:
		return firstDecodeError(errors.Unwrap(err))
	}
}

// withSource adds to a config error the environment variable that set its
// key, if one did.
func withSource(err error, fromEnv map[string]string) error {
	var ce *Error
	if !errors.As(err, &ce) || ce.Key == "" {
		return err
	}
	key, _, _ := strings.Cut(ce.Key, "[")
	if name, ok := fromEnv[key]; ok {
		ce.Msg += " (set by " + name + ")"
	}
	return err
}

var durationType = reflect.TypeFor[time.Duration]()

// durationHook parses a string as a time.Duration ("250ms", "1h30m") and
// rejects a bare number other than 0: a YAML "delay: 5" would otherwise be
// 5ns.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType || from == durationType {
		return data, nil
	}
	switch from.Kind() {
	case reflect.String:
		d, err := time.ParseDuration(strings.TrimSpace(data.(string)))
		if err != nil {
			return nil, fmt.Errorf("invalid duration %q (want e.g. 1s, 250ms, 10m, 24h)", data)
		}
		return d, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if reflect.ValueOf(data).IsZero() {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("duration %v has no unit (want e.g. \"%vs\" or \"%vms\")", data, data, data)
	}
	return data, nil
}

// listHook splits a string (an environment value) on commas into a
// []string, trimming spaces around each element; an empty or blank string
// is the empty list. Empty elements ("a,,b") are kept, for Validate to
// report.
//
// For a []int the elements are parsed as integers.
func listHook(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to.Kind() != reflect.Slice {
		return data, nil
	}
	elem := to.Elem().Kind()
	if elem != reflect.String && elem != reflect.Int {
		return data, nil
	}
	s := strings.TrimSpace(data.(string))
	if s == "" {
		if elem == reflect.Int {
			return []int{}, nil
		}
		return []string{}, nil
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	if elem == reflect.String {
		return parts, nil
	}
	ints := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("element %d %q is not an integer", i, p)
		}
		ints[i] = n
	}
	return ints, nil
}

// byteSizeHook parses a string given for one of the fields (an int64 of the
// Config being decoded, matched by address) as a byte size, see
// parseByteSize. Other int64 fields keep plain integer parsing.
func byteSizeHook(fields ...*int64) mapstructure.DecodeHookFuncValue {
	return func(from, to reflect.Value) (any, error) {
		if from.Kind() != reflect.String || !to.CanAddr() {
			return from.Interface(), nil
		}
		p, ok := to.Addr().Interface().(*int64)
		if !ok || !slices.Contains(fields, p) {
			return from.Interface(), nil
		}
		return parseByteSize(from.String())
	}
}

// integerHook rejects a fractional number for an integer field, which
// mapstructure would otherwise truncate (max_depth: 2.5 → 2).
func integerHook(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.Float32 && from.Kind() != reflect.Float64 {
		return data, nil
	}
	switch to.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f := reflect.ValueOf(data).Float()
		if f != math.Trunc(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%v is not an integer", data)
		}
	}
	return data, nil
}

var byteSizeRE = regexp.MustCompile(`^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))\s*([A-Za-z]*)$`)

var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// parseByteSize parses an integer number of bytes or a number with a unit:
// B, kB/MB/GB/TB (powers of 1000) or KiB/MiB/GiB/TiB (powers of 1024),
// case-insensitive ("10MiB", "512KiB", "1.5MB", "1048576"). A fraction of a
// byte is dropped.
func parseByteSize(s string) (int64, error) {
	m := byteSizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("invalid byte size %q (want e.g. 1048576, 512KiB, 10MiB, 1MB)", s)
	}
	mult, ok := byteUnits[strings.ToLower(m[2])]
	if !ok {
		return 0, fmt.Errorf("invalid byte size %q: unknown unit %q (want B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)", s, m[2])
	}
	if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
		if n > math.MaxInt64/mult || n < math.MinInt64/mult {
			return 0, fmt.Errorf("byte size %q overflows int64", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("invalid byte size %q: %w", s, err)
	}
	f *= float64(mult)
	if f >= math.MaxInt64 || f <= math.MinInt64 {
		return 0, fmt.Errorf("byte size %q overflows int64", s)
	}
	return int64(f), nil
}
