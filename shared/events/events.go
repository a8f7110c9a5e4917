// Package events defines the typed records that slaves and the master send
// through the crawl's Redis Stream to the master's event sink, which writes
// them to MySQL. Times are Unix milliseconds so Lua scripts can build them.
package events

import (
	"encoding/json"
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Type names a record kind; it is the "type" field of a stream entry.
type Type string

const (
	TypePage      Type = "page"
	TypeException Type = "exception"
	TypeSlave     Type = "slave"
	TypeHeartbeat Type = "heartbeat"
	TypeLost      Type = "lost"
	TypeProxy     Type = "proxy"
	TypeDuplicate Type = "duplicate"
	TypeItem      Type = "item"
)

// KnownType reports whether t is one of the record types above.
func KnownType(t Type) bool {
	switch t {
	case TypePage, TypeException, TypeSlave, TypeHeartbeat, TypeLost, TypeProxy, TypeDuplicate, TypeItem:
		return true
	}
	return false
}

// Stream entry field names.
const (
	FieldType = "type"
	FieldData = "data"
)

// Exception kinds.
const (
	KindDNS          = "dns"
	KindConnect      = "connect"
	KindTimeout      = "timeout"
	KindTLS          = "tls"
	KindHTTPStatus   = "http_status"
	KindTooLarge     = "too_large"
	KindRobotsDenied = "robots_denied"
	KindParse        = "parse"
	KindRedirect     = "redirect"      // redirect chain too long or invalid target
	KindBlocked      = "blocked"       // private network address refused
	KindFailed       = "failed"        // attempts exhausted
	KindTrap         = "trap"          // URL rejected as a crawler trap; the message says why
	KindProxy        = "proxy"         // request failed through a proxy, or a ban was detected
	KindCharset      = "charset"       // body not decodable from its declared or sniffed encoding
	KindExtract      = "extract"       // a field failed to extract; the message names the rule, the item and the field
	KindRules        = "rules"         // a rule file edit was rejected; the message has file:line
	KindHook         = "hook"          // a Go slave's OnRequest or OnResponse hook erred, panicked, skipped, retried or failed a task
	KindItemPipeline = "item_pipeline" // a Go slave's OnItem hook erred or panicked; the item was dropped
	KindOther        = "other"
)

// KindForgedEvent is an event the master's sink refused to store: it came
// from a slave's own stream but named another crawl or another slave than
// the stream's, or a time more than 5 minutes ahead of the master's clock.
// The exception is stored for the stream's crawl and slave in its place;
// its message names the field that disagreed.
const KindForgedEvent = "forged_event"

// KindAPILimit records a slave of the work API over one of its token's
// limits (requests a second, body size, links a completion, leases held):
// slowed or refused; the message says which.
const KindAPILimit = "api_limit"

// KindInvalidInput records what the frontier's functions refused from a
// caller: a link or a seed out of form (a host that is not its URL's, a
// task string of another form); the message says what.
const KindInvalidInput = "invalid_input"

// KindSitemap is a problem with a sitemap (docs/crawling.md "Sitemaps"): over the
// 50,000-URL or 50 MB limit, not parsable, nested too deep, or listing
// URLs it may not (another host, outside its directory, out of scope):
// one exception per sitemap, whose message counts what was dropped.
const KindSitemap = "sitemap"

// Render exception kinds: a page that had to be rendered in a browser and
// could not be. Exception.Snapshot may name a saved HTML snapshot.
const (
	KindRender           = "render"            // render failure of no more specific kind
	KindRenderTimeout    = "render_timeout"    // the page did not finish rendering in time
	KindRenderCrash      = "render_crash"      // the browser (or its tab) crashed
	KindRenderNavigation = "render_navigation" // the browser could not navigate to the page
)

// Slave event kinds.
const (
	SlaveJoin  = "join"
	SlaveLeave = "leave"
	SlaveDeath = "death"
)

// Lost task reasons.
const (
	LostExpired   = "expired"
	LostSlaveDead = "slave_dead"
)

// Proxy states, the State of a Proxy record: the life of one proxy in a
// slave's session pool.
const (
	ProxyAdded   = "added"   // put in the pool
	ProxyUp      = "up"      // usable (again)
	ProxyCooling = "cooling" // resting after errors or a ban
	ProxyRetired = "retired" // taken out of rotation for good
	ProxyRemoved = "removed" // dropped from the pool (config change, slave leaving)
)

// ProxyDirect is Page.Proxy for a page fetched without a proxy.
const ProxyDirect = "direct"

// ChecksumLen is the length of a content checksum as Page.Checksum and
// Duplicate.ContentHash carry it: a 64-bit checksum in lowercase hex.
const ChecksumLen = 16

// FormatChecksum renders a 64-bit content checksum as ChecksumLen
// lowercase hex digits, zero-padded.
func FormatChecksum(sum uint64) string {
	return fmt.Sprintf("%016x", sum)
}

// Page records one fetched page.
type Page struct {
	Crawl       string `json:"crawl"`
	URL         string `json:"url"`
	FinalURL    string `json:"final_url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Bytes       int64  `json:"bytes"`
	Depth       int    `json:"depth"`
	FetchedAt   int64  `json:"fetched_at"` // unix ms
	Slave       string `json:"slave"`
	ContentHash string `json:"content_hash"` // hex SHA-1 of the body (the hash of its WARC payload digest)
	DurationMS  int64  `json:"duration_ms"`
	Attempt     int    `json:"attempt"`
	Links       int    `json:"links"`
	// The fields below are set by the slave's fetch pipeline; empty when
	// unknown (and omitted from the JSON).
	Charset  string `json:"charset,omitempty"`  // encoding the body was decoded from, e.g. "utf-8"
	WARC     string `json:"warc,omitempty"`     // "file.warc.gz:offset" of its WARC record; "" when not stored
	Proxy    string `json:"proxy,omitempty"`    // redacted proxy URL, or ProxyDirect
	Handler  string `json:"handler,omitempty"`  // content handler that processed it, e.g. "html", "store"
	Checksum string `json:"checksum,omitempty"` // 64-bit content checksum, ChecksumLen hex digits
	// Set when the page went through rules (rendering, item extraction).
	Rendered bool   `json:"rendered,omitempty"` // fetched through a browser that ran its scripts
	RuleSet  string `json:"rule,omitempty"`     // name of the rule set that matched the page
	// What the page says about itself (robots meta tags, X-Robots-Tag,
	// rel="canonical").
	Robots    string `json:"robots,omitempty"`    // restricting directives obeyed, e.g. "noindex,nofollow" (robots.Directives)
	Canonical string `json:"canonical,omitempty"` // the canonical URL it names
	// LastMod is the page's <lastmod> in the sitemap that listed it, unix
	// seconds; 0 when it was not listed with one.
	LastMod int64 `json:"lastmod,omitempty"`
	// Set for incremental recrawls: the page's validators as the fetch
	// left them (the response's, or for a 304 the ones it confirmed), and
	// how a recrawl found it: RevisitUnchanged, RevisitChanged, or "" for
	// a page fetched without a recrawl's validators.
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	Revisit      string `json:"revisit,omitempty"`
}

// Page.Revisit values.
const (
	// RevisitUnchanged: a recrawl found the page as it was (304 Not
	// Modified, or the same content checksum); its links and items were
	// kept, not extracted again.
	RevisitUnchanged = "unchanged"
	// RevisitChanged: a recrawl fetched a page recorded before and found
	// it different; it was processed as a new page.
	RevisitChanged = "changed"
)

// Exception records one thing that went wrong with a URL.
type Exception struct {
	Crawl   string `json:"crawl"`
	Kind    string `json:"kind"`
	URL     string `json:"url"`
	Host    string `json:"host"`
	Slave   string `json:"slave"`
	Attempt int    `json:"attempt"`
	Status  int    `json:"status"`
	Message string `json:"message"`
	At      int64  `json:"at"` // unix ms
	// Snapshot is the path of a saved HTML snapshot of the page, for render
	// failures; empty when none was saved.
	Snapshot string `json:"snapshot,omitempty"`
}

// Slave records a slave joining, leaving or dying.
type Slave struct {
	Crawl  string `json:"crawl"`
	Slave  string `json:"slave"`
	Kind   string `json:"kind"`
	Host   string `json:"host"`
	At     int64  `json:"at"` // unix ms
	Detail string `json:"detail"`
}

// Heartbeat is one sample of a slave's counters.
type Heartbeat struct {
	Crawl        string  `json:"crawl"`
	Slave        string  `json:"slave"`
	Host         string  `json:"host"`
	PID          int     `json:"pid"`
	At           int64   `json:"at"` // unix ms
	StartedAt    int64   `json:"started_at"`
	Pages        int64   `json:"pages"`
	Errors       int64   `json:"errors"`
	InFlight     int64   `json:"in_flight"`
	Bytes        int64   `json:"bytes"`
	RSS          int64   `json:"rss"`
	PagesPerSec  float64 `json:"pages_per_sec"`
	Concurrency  int     `json:"concurrency"`
	State        string  `json:"state"`                   // running, draining
	Render       bool    `json:"render"`                  // the slave can render pages in a browser
	RulesVersion string  `json:"rules_version,omitempty"` // version of the rule files the slave runs
	MetricsAddr  string  `json:"metrics_addr,omitempty"`  // host:port of the slave's Prometheus /metrics
}

// Lost records a task whose lease was taken back.
type Lost struct {
	Crawl      string `json:"crawl"`
	URL        string `json:"url"`
	Slave      string `json:"slave"`
	LeasedAt   int64  `json:"leased_at"`   // unix ms
	DetectedAt int64  `json:"detected_at"` // unix ms
	Attempt    int    `json:"attempt"`
	Reason     string `json:"reason"`
}

// Proxy records one state change of a proxy in a slave's session pool.
type Proxy struct {
	Crawl  string `json:"crawl"`
	Slave  string `json:"slave"`
	Proxy  string `json:"proxy"`  // proxy URL with its credentials redacted
	State  string `json:"state"`  // one of the Proxy* states
	Reason string `json:"reason"` // why, e.g. "3 errors in a row", "ban: HTTP 403"
	Errors int    `json:"errors"` // errors through this proxy so far
	Uses   int    `json:"uses"`   // requests through this proxy so far
	At     int64  `json:"at"`     // unix ms
}

// Duplicate records a page whose content was already seen in the crawl.
// It is built by a Redis Lua script with cjson.encode, so its JSON names
// must stay as they are.
type Duplicate struct {
	Crawl       string `json:"crawl"`
	URL         string `json:"url"`
	FirstURL    string `json:"first_url"`    // the URL the content was first seen at
	ContentHash string `json:"content_hash"` // 64-bit content checksum, ChecksumLen hex digits
	Slave       string `json:"slave"`
	At          int64  `json:"at"` // unix ms
}

// Item records one item extracted from a page by a rule set. A re-fetch of
// the URL replaces the item's stored data when it is newer (FetchedAt).
type Item struct {
	Crawl     string          `json:"crawl"`
	Rule      string          `json:"rule"` // name of the rule set
	Item      string          `json:"item"` // name of the item rule in the rule set
	URL       string          `json:"url"`
	Data      json.RawMessage `json:"data"` // the extracted fields, as a JSON object
	Slave     string          `json:"slave"`
	FetchedAt int64           `json:"fetched_at"` // unix ms
}

// Envelope is one decoded stream entry.
type Envelope struct {
	ID        string // stream entry id, unique per crawl; makes inserts idempotent
	Type      Type
	Page      *Page
	Exception *Exception
	Slave     *Slave
	Heartbeat *Heartbeat
	Lost      *Lost
	Proxy     *Proxy
	Duplicate *Duplicate
	Item      *Item
}

// Encode returns the stream fields for a record.
func Encode(v any) (Type, []byte, error) {
	var t Type
	switch v.(type) {
	case *Page, Page:
		t = TypePage
	case *Exception, Exception:
		t = TypeException
	case *Slave, Slave:
		t = TypeSlave
	case *Heartbeat, Heartbeat:
		t = TypeHeartbeat
	case *Lost, Lost:
		t = TypeLost
	case *Proxy, Proxy:
		t = TypeProxy
	case *Duplicate, Duplicate:
		t = TypeDuplicate
	case *Item, Item:
		t = TypeItem
	default:
		return "", nil, fmt.Errorf("encode event: unknown record %T", v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", nil, fmt.Errorf("encode %s event: %w", t, err)
	}
	return t, b, nil
}

// Decode turns a stream entry back into a record.
func Decode(id string, t Type, data []byte) (Envelope, error) {
	e := Envelope{ID: id, Type: t}
	var target any
	switch t {
	case TypePage:
		e.Page = new(Page)
		target = e.Page
	case TypeException:
		e.Exception = new(Exception)
		target = e.Exception
	case TypeSlave:
		e.Slave = new(Slave)
		target = e.Slave
	case TypeHeartbeat:
		e.Heartbeat = new(Heartbeat)
		target = e.Heartbeat
	case TypeLost:
		e.Lost = new(Lost)
		target = e.Lost
	case TypeProxy:
		e.Proxy = new(Proxy)
		target = e.Proxy
	case TypeDuplicate:
		e.Duplicate = new(Duplicate)
		target = e.Duplicate
	case TypeItem:
		e.Item = new(Item)
		target = e.Item
	default:
		return e, fmt.Errorf("decode event %s: unknown type %q", id, t)
	}
	if err := jsonv2.Unmarshal(data, target, decodeOpts); err != nil {
		return e, fmt.Errorf("decode %s event %s: %w", t, id, err)
	}
	return e, nil
}

// decodeOpts read an event as encoding/json reads it (invalid UTF-8 as
// U+FFFD, a repeated member's last value, member names in any case), with
// JSON v2's decoder (github.com/go-json-experiment/json): the sink
// decodes every event a slave or a function writes, and v2 takes a third
// of encoding/json's time on a page event (BenchmarkDecodePage).
var decodeOpts = jsonv2.JoinOptions(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true),
	jsonv2.MatchCaseInsensitiveNames(true), jsonv1.MatchCaseSensitiveDelimiter(true))
