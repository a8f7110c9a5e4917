// Package rules loads the per-site rule sets an admin keeps as YAML files
// in a directory (rules/ at the top of the repository; the schema is
// documented in rules/README.md): which URLs a rule set covers (hosts,
// urls, priority), its scope, queue strategy, politeness, session, fetch
// and render settings, the items to extract, and a re-crawl schedule.
//
// Design:
//
//   - Files are parsed with the yaml.Node API, never decoded into structs
//     blindly, so every problem (unknown key, wrong type, bad regex, bad
//     selector, bad duration, duplicate name) carries file:line:col, and
//     every problem of every file is reported at once (Errors). Aliases are
//     refused, so a file cannot expand exponentially.
//   - Regexes are RE2 (package regexp): matching is linear in the URL, so a
//     rule file cannot stall a slave. Item fields are compiled by package
//     extract, whose errors name the key that is mapped back to its line.
//   - A Set is immutable after loading and safe for concurrent use. Its
//     Version is a SHA-256 over the sorted file names and contents.
//   - Distribution: the master publishes Set.Marshal (the raw files) to
//     Redis and slaves Unmarshal them, re-running the same parse and
//     validation, so both sides agree and the Version survives the trip.
//   - Match is an index lookup: exact hosts in a map, wildcard hosts in a
//     map by suffix (one lookup per label of the host), then the rule sets
//     without hosts; among matches the highest priority wins, then the
//     most specific host (exact, then the longest wildcard, then none),
//     then the first file in name order.
package rules

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/extract"
	"github.com/redcrawl/redcrawl/shared/urlx"
	"github.com/robfig/cron/v3"
)

// LoadOptions are what the loader validates against.
type LoadOptions struct {
	// ProxyPools are the names session.proxy_pool may use ("" is always
	// allowed: the default pool).
	ProxyPools []string
}

// Set is every rule set of a directory. It is immutable after loading.
type Set struct {
	// Version identifies the files' contents: hex SHA-256 over the sorted
	// file names and contents.
	Version string
	// Files are the loaded file names (base names), sorted.
	Files []string
	// Sets are the rule sets, one per file, in file order.
	Sets []*RuleSet

	raw    map[string][]byte
	exact  map[string][]*RuleSet // host -> rule sets, by rank
	wild   map[string][]*RuleSet // "example.com" for *.example.com -> rule sets, by rank
	noHost []*RuleSet            // by rank
	polite bool                  // a rule set overrides politeness (SetsPoliteness)
}

// SetsPoliteness reports whether a rule set of s overrides a host's
// politeness (delay, jitter or concurrency); found when s is built.
func (s *Set) SetsPoliteness() bool { return s != nil && s.polite }

// RuleSet is the rules of one file.
type RuleSet struct {
	Name string
	File string // base name of the file it was loaded from
	// Hosts are canonical host names; "*.example.com" covers example.com
	// and every host below it. Empty = every host.
	Hosts []string
	// URLs are RE2 regexes on the canonical URL; empty = every URL of Hosts.
	URLs     []string
	Priority int
	Scope    Scope
	// Strategy orders this site's queue: "bfs", "dfs" or "" (crawl-wide).
	Strategy   string
	Politeness Politeness
	Session    Session
	Fetch      Fetch
	Render     []*Render
	Items      []*ItemRule
	// Schedule is a cron expression or descriptor (@daily); "" = none.
	Schedule string
	// Sitemaps overrides crawl.sitemaps for the site: "robots", "seed" or
	// "off"; "" = the crawl's.
	Sitemaps string

	order    int
	urls     []*regexp.Regexp
	scope    *urlx.Scope
	schedule cron.Schedule
}

// Scope narrows what is crawled on the rule set's URLs.
type Scope struct {
	Allow    []string
	Deny     []string
	MaxDepth int // 0 = unlimited
}

// Politeness overrides the crawl-wide politeness; nil = unset.
type Politeness struct {
	Delay       *time.Duration
	Jitter      *float64
	Concurrency *int
}

// Overrides reports whether p sets any of its fields.
func (p Politeness) Overrides() bool {
	return p.Delay != nil || p.Jitter != nil || p.Concurrency != nil
}

// Session overrides fetch sessions; nil = unset.
type Session struct {
	Proxies   *bool  // false = direct connections for this site
	ProxyPool string // a named pool; "" = default
	Cookies   *bool
}

// Fetch overrides the crawl-wide fetch settings for the rule set's URLs;
// the zero value keeps every one of them.
type Fetch struct {
	// UserAgents is the site's rotation list (fetch.user_agents): one per
	// session, the site's sessions taking them in turn; nil = the crawl's.
	UserAgents []string
	// Headers are extra request headers, one value per canonical name,
	// sent with every request to the site (its robots.txt included);
	// nil = none.
	Headers http.Header
	// RetryStatuses are the HTTP statuses after which a page is fetched
	// again later; nil = the crawl's (408, 429 and 5xx), empty = none.
	RetryStatuses []int
	// Timeout bounds one request; 0 = fetch.timeout.
	Timeout time.Duration
}

// Render says which URLs are dynamic and rendered in headless Chrome.
type Render struct {
	Match           []string
	WaitSelector    string
	WaitNetworkIdle bool
	Timeout         time.Duration // default DefaultRenderTimeout
	Scroll          int
	Click           *Click
	Block           []string // resource types: image, font, media, stylesheet
	MaybeDynamic    *MaybeDynamic

	match []*regexp.Regexp
}

// DefaultRenderTimeout is render.timeout when unset.
const DefaultRenderTimeout = 20 * time.Second

// Click is a "load more" element clicked up to Times times.
type Click struct {
	Selector string
	Times    int
}

// MaybeDynamic marks URLs that are fetched statically first: a page with
// fewer than MinLinks links is rendered once and the outcome learned.
type MaybeDynamic struct {
	Match    []string
	MinLinks int

	match []*regexp.Regexp
}

// ItemRule is one kind of item and the URLs that carry it.
type ItemRule struct {
	Name  string
	Match []string // empty = every URL of the rule set
	// Types are the media types the rule applies to (types: in the file;
	// "text/*", "*/*" match a group or every type). Empty = HTML
	// (text/html, application/xhtml+xml), and JSON too when every field
	// is a JSON path: an item rule does not run on a script, an image or
	// a PDF its URL pattern also matches.
	Types     []string
	Fields    []extract.Field
	Extractor *extract.Extractor

	match []*regexp.Regexp
}

// Match returns the rule set for u, or nil when none covers it.
func (s *Set) Match(u *url.URL) *RuleSet {
	if s == nil || u == nil {
		return nil
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	str := u.String()
	var best *RuleSet
	bestSpec := 0
	consider := func(list []*RuleSet, spec int) {
		for _, rs := range list {
			if best != nil && rs.Priority < best.Priority {
				return // lists are sorted: nothing better follows
			}
			if rs.matchURL(str) {
				if best == nil || better(rs, spec, best, bestSpec) {
					best, bestSpec = rs, spec
				}
				return
			}
		}
	}
	consider(s.exact[host], 1<<20)
	for h := host; h != ""; {
		if list := s.wild[h]; list != nil {
			consider(list, len(h))
		}
		i := strings.IndexByte(h, '.')
		if i < 0 {
			break
		}
		h = h[i+1:]
	}
	consider(s.noHost, -1)
	return best
}

// better reports whether a (of specificity sa) beats b.
func better(a *RuleSet, sa int, b *RuleSet, sb int) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if sa != sb {
		return sa > sb
	}
	return a.order < b.order
}

func (rs *RuleSet) matchURL(s string) bool {
	return len(rs.urls) == 0 || anyMatch(rs.urls, s)
}

func anyMatch(res []*regexp.Regexp, s string) bool {
	for _, re := range res {
		if re.MatchString(s) {
			return true
		}
	}
	return false
}

// InScope reports whether u, at link depth depth, is in the rule set's
// scope; reason is "depth", "allow" or "deny" when not (urlx's reasons).
func (rs *RuleSet) InScope(u *url.URL, depth int) (ok bool, reason string) {
	return rs.scope.Check(u, depth)
}

// RenderFor returns the first render rule whose match covers u; nil means
// fetch statically (see MaybeDynamicFor).
func (rs *RuleSet) RenderFor(u *url.URL) *Render {
	if u == nil {
		return nil
	}
	s := u.String()
	for _, r := range rs.Render {
		if anyMatch(r.match, s) {
			return r
		}
	}
	return nil
}

// MaybeDynamicFor returns the first render rule whose maybe_dynamic.match
// covers u: fetch u statically, then ask the rule's ShouldRender.
func (rs *RuleSet) MaybeDynamicFor(u *url.URL) *Render {
	if u == nil {
		return nil
	}
	s := u.String()
	for _, r := range rs.Render {
		if r.MaybeDynamic != nil && anyMatch(r.MaybeDynamic.match, s) {
			return r
		}
	}
	return nil
}

// ShouldRender is the maybe_dynamic predicate: a statically fetched page
// with links links should be rendered once when it has fewer than
// min_links.
func (r *Render) ShouldRender(links int) bool {
	return r != nil && r.MaybeDynamic != nil && links < r.MaybeDynamic.MinLinks
}

// ItemsFor returns the item rules whose match covers u.
func (rs *RuleSet) ItemsFor(u *url.URL) []*ItemRule {
	if u == nil {
		return nil
	}
	s := u.String()
	var out []*ItemRule
	for _, it := range rs.Items {
		if len(it.match) == 0 || anyMatch(it.match, s) {
			out = append(out, it)
		}
	}
	return out
}

// htmlTypes are the media types an item rule applies to by default.
var htmlTypes = []string{"text/html", "application/xhtml+xml"}

// AppliesTo reports whether the item rule runs on a document of media type
// mt (lower case, without parameters): Types, or by default HTML, and
// JSON when every field is a JSON path.
func (it *ItemRule) AppliesTo(mt string) bool {
	mt = strings.ToLower(strings.TrimSpace(mt))
	if len(it.Types) > 0 {
		for _, t := range it.Types {
			if mediaMatch(t, mt) {
				return true
			}
		}
		return false
	}
	if slices.Contains(htmlTypes, mt) {
		return true
	}
	json := mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
	if !json || len(it.Fields) == 0 {
		return false
	}
	for _, f := range it.Fields {
		if f.JSON == "" {
			return false
		}
	}
	return true
}

// mediaMatch matches a media type against a pattern: "type/sub",
// "type/*" or "*/*".
func mediaMatch(pattern, mt string) bool {
	if pattern == "*/*" || pattern == mt {
		return true
	}
	if group, ok := strings.CutSuffix(pattern, "/*"); ok {
		return strings.HasPrefix(mt, group+"/")
	}
	return false
}

// NextRun returns the first scheduled time after t; ok is false when the
// rule set has no schedule.
func (rs *RuleSet) NextRun(t time.Time) (next time.Time, ok bool) {
	if rs.schedule == nil {
		return time.Time{}, false
	}
	return rs.schedule.Next(t), true
}
