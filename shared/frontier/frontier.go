// Package frontier is the crawl's shared work queue: seen-URL dedup,
// per-host queues under global politeness, leased claims, retries, lost-task
// recovery and termination. The Redis implementation keeps all of it in one
// Redis (or one Redis Cluster slot per crawl); every multi-key step is one
// Lua script, so any number of slaves and one master can use it at once.
//
// The interfaces are small and split by who uses them: slaves Claim,
// Complete and Extend; the seed command Seeds; the master Supervises; every
// process reports through the Registry. One shared test suite
// (frontiertest) runs against every implementation.
package frontier

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// Task is one URL to fetch.
type Task struct {
	URL       string // canonical absolute URL
	Host      string // politeness key: urlx.HostKey
	ScopeHost string // host name without port, for the seeds' host scope
	Depth     int    // links followed from a seed
	Hops      int    // redirects followed to reach this URL
	Attempt   int    // failed attempts so far
	Priority  int64  // lower is claimed first within a host (BFS: depth)
	// PathKey is scheme://host/path for a URL with a query, "" otherwise:
	// Options.MaxQueryVariants caps the URLs enqueued per path key.
	PathKey string
	// DateQuery says the query holds a date (urlx.DateQuery): the URLs of
	// its path key are capped at Options.MaxDateVariants instead, since a
	// calendar's next-day links never end.
	DateQuery bool
	// Score is the URL's own importance IL (higher is more important), used
	// by the priority strategy when the URL is first enqueued.
	Score float64
	// Render says the URL must be rendered in a headless browser: it waits
	// in its host's render queues and only a claim with ClaimOptions.Render
	// gets it. The flag stays with the task through retries, releases and
	// lost leases. Politeness is the host's whatever the class.
	Render bool
	// Sitemap, when positive, marks a sitemap task: the URL is a sitemap at
	// that nesting level (1: listed in robots.txt or a seed host's
	// /sitemap.xml; 2: listed in a level-1 sitemap index; ...). The slave
	// parses its body as a sitemap even when its content does not say so
	// (a text sitemap).
	Sitemap int
	// SitemapAnyHost says the sitemap was listed in a robots.txt (or an
	// index that was): it may list URLs of any host in the crawl's scope
	// (sitemaps.org's cross-submits). Otherwise it may only list URLs under
	// its own directory.
	SitemapAnyHost bool
	// LastMod is the page's <lastmod> from the sitemap that listed it, in
	// unix seconds; 0 = unknown. It travels with the task (a recrawl may
	// use it) and is recorded on the page event.
	LastMod int64
	// Revisit, set on a recrawl's task of a page fetched before (Reseed)
	// and on its lease, holds what the last fetch learned of the page: the
	// slave sends a conditional request and keeps an unchanged page as it
	// is (recrawl.go). nil for a page never fetched.
	Revisit *Validators
}

// NewTask returns the task for a canonical URL found at a depth after a
// number of redirect hops, claimed breadth-first (priority = depth).
func NewTask(u *url.URL, depth, hops int) Task {
	return Task{URL: u.String(), Host: urlx.HostKey(u), ScopeHost: strings.ToLower(u.Hostname()),
		Depth: depth, Hops: hops, Priority: int64(depth)}
}

// Lease is a claimed task. Only the slave that holds the lease, with this
// token, can complete or extend it.
type Lease struct {
	Task
	Slave    string
	Token    int64
	LeasedAt time.Time
	Deadline time.Time
	// Importance is, with the priority and aopic strategies, the task's
	// importance when it was claimed (X·backlinks + Y·Score, or its cash);
	// Priority is then 0.
	Importance float64
	// Shard is the shard that leased it (its host's: sharded.go); 0 in a
	// crawl of one shard.
	Shard int
}

// Outcome says what became of a leased task.
type Outcome uint8

const (
	// Done: the URL was processed (any final status, including 3xx and 4xx
	// that are recorded and dropped); its links are enqueued.
	Done Outcome = iota + 1
	// Retry: a failure that may pass later; the task comes back after
	// RetryIn, or is failed once it has used its attempts.
	Retry
	// Fail: a failure that will not pass; the task is failed now.
	Fail
	// Release: the slave gives the lease back untried (graceful leave);
	// no attempt is counted and the task goes to the front of its queue.
	Release
)

func (o Outcome) String() string {
	switch o {
	case Done:
		return "done"
	case Retry:
		return "retry"
	case Fail:
		return "fail"
	case Release:
		return "release"
	}
	return "unknown"
}

// Event is an encoded record for the crawl's event stream.
type Event struct {
	Type events.Type
	// Data is the record's JSON, one compact value as NewEvent encodes it
	// (the work API's client sends it as it is).
	Data []byte
}

// NewEvent encodes a record from package events.
func NewEvent(v any) (Event, error) {
	t, b, err := events.Encode(v)
	return Event{Type: t, Data: b}, err
}

// Completion reports a leased task's outcome in the same atomic step as its
// discovered links and its events.
type Completion struct {
	Lease   Lease
	Outcome Outcome
	// Links are enqueued (deduplicated) when Outcome is Done.
	Links []Task
	// Events go to the event stream if and only if the lease was still held.
	Events []Event
	// HostDelay, when positive, becomes the host's politeness delay from now
	// on (robots.txt Crawl-delay, already capped).
	HostDelay time.Duration
	// Backoff, when positive, keeps every slave off the host for that long
	// (429 or 503 with or without Retry-After).
	Backoff time.Duration
	// RetryIn is the wait before a Retry outcome comes back.
	RetryIn time.Duration
	// Reason is recorded with a failed task.
	Reason string
	// ContentHash, when nonzero on a Done outcome, is the page body's 64-bit
	// checksum: a page whose content another URL of the crawl already had
	// is a duplicate, whose links are not enqueued; it is counted in
	// Stats.Duplicates and recorded as a duplicate event with the first URL.
	ContentHash uint64
	// ContentScope, when set, keeps ContentHash to the pages of that scope:
	// it is looked up and recorded among the hashes of the scope alone, so
	// it makes no page of another scope a duplicate, nor is made one. The
	// work API sets it to the slave's id: a slave that reports another
	// page's hash as its own spoils only its own pages' links.
	ContentScope string
	// Policies, keyed by Task.Host, set hosts' politeness (from the rule
	// files) before the links are enqueued, so a host's first claim already
	// obeys its policy. A policy equal to the one in force costs no write.
	// Applied only when the lease was still held.
	Policies map[string]HostPolicy
}

// HostPolicy is a host's politeness from the rule files. It is the host's,
// shared by its static and render tasks and by every slave.
type HostPolicy struct {
	// Delay, when positive, replaces Options.Delay for the host; 0 means
	// the crawl's. A delay a slave reports (Completion.HostDelay: robots.txt
	// Crawl-delay, autothrottle) is kept apart: when both are set the
	// larger wins.
	Delay time.Duration
	// Jitter replaces Options.Jitter for the host; negative means the
	// crawl's (so the zero value means no jitter).
	Jitter float64
	// Concurrency, when positive, replaces Options.HostConcurrency for the
	// host; 0 means the crawl's.
	Concurrency int
}

// Stats is a snapshot of a crawl.
type Stats struct {
	Crawl    string `json:"crawl"`
	Queued   int64  `json:"queued"`
	InFlight int64  `json:"in_flight"`
	Retry    int64  `json:"retry"`
	// NextRetryAt is when the earliest task waiting for its retry backoff
	// is due (unix ms, Redis's clock); 0 when none waits.
	NextRetryAt int64 `json:"next_retry_at,omitempty"`
	Done        int64 `json:"done"`
	Failed      int64 `json:"failed"`
	Seen        int64 `json:"seen"`
	Lost        int64 `json:"lost"`
	Retried     int64 `json:"retried"`
	Duplicates  int64 `json:"duplicates"`   // pages whose content was already seen
	TrapDropped int64 `json:"trap_dropped"` // new links dropped by MaxPagesPerHost or MaxQueryVariants
	Hosts       int64 `json:"hosts_ready"`  // hosts in the ready set (some wait for their next fetch time) or fresh
	// RenderQueued is the part of Queued waiting in render queues.
	RenderQueued int64 `json:"render_queued"`
	// RenderSlaves is the number of alive slaves whose heartbeat says they
	// can render (the heartbeat JSON's "render").
	RenderSlaves int     `json:"render_slaves"`
	SlavesAlive  int     `json:"slaves_alive"`
	PagesPerSec  float64 `json:"pages_per_sec"`
	Finished     bool    `json:"finished"`
	FinishedAt   int64   `json:"finished_at,omitempty"` // unix ms
	Requeued     int64   `json:"requeued"`              // failed tasks put back by an admin
	Reseeded     int64   `json:"reseeded"`              // seeds enqueued again by recrawls
	// RecrawlRun numbers the last recrawl run (0: none yet) and
	// RecrawlAt is when it started, unix ms (StartRecrawl).
	RecrawlRun int64 `json:"recrawl_run,omitempty"`
	RecrawlAt  int64 `json:"recrawl_at,omitempty"`
	// Paused: an admin paused the crawl (Pause); nothing is claimed.
	Paused      bool      `json:"paused"`
	PausedSince time.Time `json:"paused_since,omitzero"`
	// Shards breaks the queues down by shard (a crawl of several shards
	// only; the totals above are their sums).
	Shards []ShardStats `json:"shards,omitempty"`
	// Limits are the crawl's limits and their counts, nil when it has
	// none (limits.go).
	Limits *LimitStats `json:"limits,omitempty"`
}

// ShardStats is one shard's part of Stats.
type ShardStats struct {
	Shard int `json:"shard"`
	// Slot is the shard's Redis Cluster hash slot (of its hash tag).
	Slot     int   `json:"slot"`
	Queued   int64 `json:"queued"`
	InFlight int64 `json:"in_flight"`
	Retry    int64 `json:"retry"`
	Done     int64 `json:"done"`
	Seen     int64 `json:"seen"`
	Hosts    int64 `json:"hosts_ready"`
}

// SlaveInfo is a registered slave's last heartbeat.
type SlaveInfo struct {
	events.Heartbeat
	LastSeen time.Time
	// Gone: the slave is in the registry but has no heartbeat key (it
	// left, or was retired); only Registered lists such slaves.
	Gone bool
}

// Frontier is what a slave needs: the Redis frontier, or the work API's
// client for a slave without Redis credentials.
type Frontier interface {
	// ClaimWaitOpts leases up to max tasks whose hosts' time has come,
	// render tasks (Task.Render) too only when opts.Render, and says how
	// long to wait and which rules version is published (ClaimResult).
	ClaimWaitOpts(ctx context.Context, slave string, max int, opts ClaimOptions) (ClaimResult, error)
	// Complete acknowledges leased tasks; acked[i] is false when the
	// lease was lost (expired and taken back), in which case nothing of
	// that completion was applied.
	Complete(ctx context.Context, slave string, cs []Completion) (acked []bool, err error)
	// CompleteClaim is Complete followed by ClaimWaitOpts, atomically: the
	// host slots the acks free can be claimed by this call before any
	// other slave's claim.
	CompleteClaim(ctx context.Context, slave string, cs []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error)
	// Extend pushes the deadlines of held leases; held[i] is false for a
	// lease that was lost.
	Extend(ctx context.Context, slave string, leases []Lease) (held []bool, err error)
}

// PolicySeeder adds seeds with their hosts' politeness policies.
type PolicySeeder interface {
	// SeedWithPolicies sets the policies (keyed by Task.Host), then
	// enqueues the tasks that were never seen; it returns how many.
	SeedWithPolicies(ctx context.Context, tasks []Task, policies map[string]HostPolicy) (added int, err error)
}

// RulesStore holds the crawl's published rule set (rule files).
type RulesStore interface {
	// PutRules stores a rule set under a non-empty version and publishes
	// the version.
	PutRules(ctx context.Context, version string, blob []byte) error
	// GetRules returns the stored rule set; ok is false when there is none.
	GetRules(ctx context.Context) (version string, blob []byte, ok bool, err error)
}

// Seeder adds seeds.
type Seeder interface {
	// Seed enqueues the tasks that were never seen; it returns how many.
	Seed(ctx context.Context, tasks []Task) (added int, err error)
}

// Supervisor is what the master needs.
type Supervisor interface {
	// RecoverExpired takes back up to limit leases whose deadline passed.
	RecoverExpired(ctx context.Context, limit int) (int, error)
	// RecoverSlave takes back every lease of a slave at once and removes
	// it from the registry, recording its death.
	RecoverSlave(ctx context.Context, slave string) (int, error)
	// CheckFinished decides, atomically, whether the crawl is finished:
	// nothing queued, in flight or waiting for retry for the whole
	// quiescence window.
	CheckFinished(ctx context.Context, quiescence time.Duration) (bool, error)
	// Stats returns a snapshot.
	Stats(ctx context.Context) (Stats, error)
}

// Registry tracks live slaves.
type Registry interface {
	// Heartbeat registers or refreshes a slave; the first one records a join.
	Heartbeat(ctx context.Context, hb events.Heartbeat) error
	// Leave deregisters a slave after a graceful leave and records it.
	Leave(ctx context.Context, slave, detail string) error
	// Slaves lists registered slaves with their last heartbeat.
	Slaves(ctx context.Context) ([]SlaveInfo, error)
}

// ErrUnavailable wraps errors from the backing store being unreachable, so
// callers can pause and retry instead of failing.
var ErrUnavailable = errors.New("frontier unavailable")

// OnlyRetries reports whether the only work left is tasks waiting for
// their retry backoff (nothing queued or in flight), and how long until
// the next one is due at now (0 when it is due already): what a user sees
// while a crawl that fetched its last good page waits on failing ones.
func (s Stats) OnlyRetries(now time.Time) (only bool, dueIn time.Duration) {
	if s.Retry == 0 || s.Queued > 0 || s.InFlight > 0 || s.Finished {
		return false, 0
	}
	if s.NextRetryAt > 0 {
		dueIn = max(time.UnixMilli(s.NextRetryAt).Sub(now), 0)
	}
	return true, dueIn
}
