package admin

import (
	"context"
	"errors"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// Backend is what the admin server reads and acts on. The master
// (masterd) implements it over Redis and MySQL; tests use a fake.
type Backend interface {
	// Overview is the dashboard's top half: crawls, slaves, rules.
	Overview(ctx context.Context) (Overview, error)
	// Series returns the crawl's pages per second in buckets of step over
	// the last span, oldest first, with empty buckets as zero.
	Series(ctx context.Context, crawl string, span, step time.Duration) ([]Point, error)
	// Exceptions pages through the exception log, newest first.
	Exceptions(ctx context.Context, q ExceptionQuery) (ExceptionPage, error)
	// Lost pages through lost tasks (leases taken back), newest first.
	Lost(ctx context.Context, crawl string, limit, offset int) ([]events.Lost, error)
	// Proxies is each proxy's latest state, from the proxy events.
	Proxies(ctx context.Context, crawl string) ([]ProxyHealth, error)
	// Act carries out an admin action. An error wrapping ErrBadAction is
	// the caller's fault (unknown crawl, slave or proxy; no URLs).
	Act(ctx context.Context, a Action) (ActionResult, error)
}

// ErrBadAction marks an action refused because of its arguments.
var ErrBadAction = errors.New("bad action")

// Overview is a snapshot of what the master supervises.
type Overview struct {
	Now    time.Time   `json:"now"`
	Crawls []CrawlView `json:"crawls"`
	Slaves []SlaveView `json:"slaves"`
	Rules  RulesView   `json:"rules"`
}

// CrawlView is one crawl's counters and state.
type CrawlView struct {
	frontier.Stats
	Paused bool `json:"paused"`
	// Other marks a crawl of the same Redis that this master does not run:
	// listed with its counters, without actions (another master runs it,
	// or none).
	Other bool `json:"other,omitempty"`
	// Schedules are the crawl's recrawl schedules: the config's
	// (crawl.schedule, Name "") and each rule file's.
	Schedules []ScheduleView `json:"schedules"`
	// Recrawl is the last recrawl run's pages by how they were found
	// (nil: no run yet, or its counts could not be read).
	Recrawl *RecrawlView `json:"recrawl,omitempty"`
}

// RecrawlView is a recrawl run: its number, start, and the pages fetched
// since, unchanged (304 or same checksum), changed and new.
type RecrawlView struct {
	Run       int64     `json:"run"`
	Started   time.Time `json:"started"`
	Unchanged int64     `json:"unchanged"`
	Changed   int64     `json:"changed"`
	New       int64     `json:"new"`
}

// ScheduleView is one recrawl schedule.
type ScheduleView struct {
	Name    string    `json:"name"` // "" = the crawl's (config); else the rule set
	Spec    string    `json:"spec"` // "@daily", "0 */6 * * *"
	LastRun time.Time `json:"last_run,omitzero"`
	NextRun time.Time `json:"next_run"`
}

// SlaveView is one registered slave.
type SlaveView struct {
	events.Heartbeat
	LastSeen time.Time `json:"last_seen"`
	// Alive is false once the slave has been silent for master.dead_after.
	Alive bool `json:"alive"`
	// Draining is true once an admin asked it to finish and leave.
	Draining bool `json:"draining"`
}

// RulesView is the rule files in force.
type RulesView struct {
	Dir         string    `json:"dir"`
	Version     string    `json:"version"`
	RuleSets    int       `json:"rule_sets"`
	LoadedAt    time.Time `json:"loaded_at,omitzero"`
	LastError   string    `json:"last_error,omitempty"` // the last rejected edit, with file:line
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
}

// Point is one bucket of a series.
type Point struct {
	At          time.Time `json:"at"` // bucket start
	PagesPerSec float64   `json:"pages_per_sec"`
}

// ExceptionQuery filters the exception log. Empty strings and zero times
// match anything.
type ExceptionQuery struct {
	Crawl  string
	Kind   string
	Host   string
	Slave  string
	Since  time.Time
	Until  time.Time
	Limit  int // 1..1000
	Offset int
}

// ExceptionPage is one page of exceptions and how many match in all.
type ExceptionPage struct {
	Total int                `json:"total"`
	Items []events.Exception `json:"items"`
}

// ProxyHealth is a proxy's latest state across slaves.
type ProxyHealth struct {
	Proxy  string    `json:"proxy"` // redacted URL
	State  string    `json:"state"` // events.Proxy* (added, up, cooling, retired, removed)
	Slave  string    `json:"slave"` // slave of the latest event
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
	Bans   int       `json:"bans"` // cooling and retired events in the crawl
}

// Action kinds.
const (
	ActPause       = "pause"        // Crawl
	ActResume      = "resume"       // Crawl
	ActSeed        = "seed"         // Crawl, URLs
	ActRequeue     = "requeue"      // Crawl: failed tasks back to the queues
	ActDrain       = "drain"        // Slave: finish in-flight work and leave
	ActRetireProxy = "retire_proxy" // Crawl, Proxy (redacted URL as listed)
)

// Action is an admin request.
type Action struct {
	Kind  string   `json:"kind"`
	Crawl string   `json:"crawl,omitempty"`
	Slave string   `json:"slave,omitempty"`
	Proxy string   `json:"proxy,omitempty"`
	URLs  []string `json:"urls,omitempty"`
}

// ActionResult says what an action did.
type ActionResult struct {
	OK      bool   `json:"ok"`
	Count   int    `json:"count"` // seeds added, tasks requeued, ...
	Message string `json:"message"`
}
