// Package workapi is the wire protocol of the master's work API: how a
// slave on a machine you do not trust gets and returns work with no Redis
// or MySQL credential of its own (the master serves it: master/workapi;
// the slave's client: slave/workclient).
//
// It is HTTPS with JSON bodies: the standard library serves and speaks
// it (no code generation, no new dependency, nothing for a Raspberry Pi
// to build), any load balancer or proxy carries it, and curl can debug
// it. The master serves HTTP/1.1 and HTTP/2; the slave's client keeps a
// few HTTP/1.1 connections alive (slave/workclient says why). Every request carries the slave's token (Authorization:
// Bearer); the master takes the slave and the crawl from the token, never
// from the body. Times are unix milliseconds.
//
// A request the master refuses gets an Error body and a status: 400 (out
// of form), 401 (no or unknown token), 403 (a revoked token), 413 (over a
// size limit), 429 (over the token's rate: Retry-After says when to come
// back), 503 (the master cannot reach Redis or MySQL now: come back, as
// after an outage).
package workapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/redcrawl/redcrawl/shared/events"
)

// The API's paths; every request is a POST with a JSON body, but Watch,
// Rules and Hello, which are GETs.
const (
	PathHello     = "/work/v1/hello"
	PathClaim     = "/work/v1/claim"
	PathComplete  = "/work/v1/complete"
	PathExtend    = "/work/v1/extend"
	PathHeartbeat = "/work/v1/heartbeat"
	PathLeave     = "/work/v1/leave"
	PathRules     = "/work/v1/rules"
	PathRobots    = "/work/v1/robots"
	PathEvents    = "/work/v1/events"
	PathWatch     = "/work/v1/watch"
)

// Hello is what GET PathHello answers: who the token is.
type Hello struct {
	Crawl string `json:"crawl"`
	Slave string `json:"slave"`
	// Shards is the crawl's shard count (a lease names its shard).
	Shards int `json:"shards"`
	// Library is the master's frontier library (its version), for the
	// slave's log.
	Library string `json:"library"`
}

// ClaimRequest asks for up to Max leases.
type ClaimRequest struct {
	Max    int  `json:"max"`
	Render bool `json:"render,omitempty"`
}

// ClaimResponse is a claim's leases and when to ask again.
type ClaimResponse struct {
	Leases []Lease `json:"leases"`
	// WaitMs is how long until a host is ready; -1: none known.
	WaitMs int64 `json:"wait_ms"`
	// Busy: nothing to lease now, but work may come as soon as a lease
	// ends (frontier.ClaimResult.Busy).
	Busy         bool   `json:"busy,omitempty"`
	RulesVersion string `json:"rules_version,omitempty"`
}

// Lease is a leased task (frontier.Lease).
type Lease struct {
	URL            string      `json:"url"`
	Host           string      `json:"host"`
	Depth          int         `json:"depth"`
	Hops           int         `json:"hops,omitempty"`
	Attempt        int         `json:"attempt,omitempty"`
	Priority       int64       `json:"priority,omitempty"`
	Importance     float64     `json:"importance,omitempty"`
	Render         bool        `json:"render,omitempty"`
	Sitemap        int         `json:"sitemap,omitempty"`
	SitemapAnyHost bool        `json:"sitemap_any_host,omitempty"`
	LastMod        int64       `json:"lastmod,omitempty"`
	Token          int64       `json:"token"`
	LeasedAt       int64       `json:"leased_at"`
	Deadline       int64       `json:"deadline"`
	Shard          int         `json:"shard,omitempty"`
	Revisit        *Validators `json:"revisit,omitempty"`
}

// Validators are a recrawl's validators of a page (frontier.Validators).
type Validators struct {
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	Checksum     string `json:"checksum,omitempty"`
}

// LeaseRef names a lease the slave holds.
type LeaseRef struct {
	URL   string `json:"url"`
	Token int64  `json:"token"`
	Shard int    `json:"shard,omitempty"`
}

// Outcomes of a Completion (frontier.Outcome).
const (
	OutcomeDone    = "done"
	OutcomeRetry   = "retry"
	OutcomeFail    = "fail"
	OutcomeRelease = "release"
)

// CompleteRequest acknowledges leases and, with Claim, claims in the same
// step (frontier.CompleteClaim).
type CompleteRequest struct {
	Completions []Completion  `json:"completions"`
	Claim       *ClaimRequest `json:"claim,omitempty"`
}

// Completion is a lease's outcome with its links and events
// (frontier.Completion). Links are URLs: the master plans their tasks
// itself (canonical form, scope, traps, the rule files' render and
// politeness), so a slave sends what a page links to, nothing the
// frontier takes on trust.
type Completion struct {
	Lease   LeaseRef `json:"lease"`
	Outcome string   `json:"outcome"`
	Links   []Link   `json:"links,omitempty"`
	Events  []Event  `json:"events,omitempty"`
	// HostDelayMs, BackoffMs, RetryInMs: frontier.Completion's HostDelay,
	// Backoff and RetryIn (the crawl's caps apply).
	HostDelayMs int64  `json:"host_delay_ms,omitempty"`
	BackoffMs   int64  `json:"backoff_ms,omitempty"`
	RetryInMs   int64  `json:"retry_in_ms,omitempty"`
	Reason      string `json:"reason,omitempty"`
	// ContentHash is the page body's 64-bit checksum, 16 hex digits; ""
	// for none.
	ContentHash string `json:"content_hash,omitempty"`
}

// Link is a URL a page led to: a link (Depth the page's + 1), a redirect
// target (the page's depth, Hops + 1) or a sitemap's entry.
type Link struct {
	URL            string `json:"url"`
	Depth          int    `json:"depth"`
	Hops           int    `json:"hops,omitempty"`
	Sitemap        int    `json:"sitemap,omitempty"`
	SitemapAnyHost bool   `json:"sitemap_any_host,omitempty"`
	LastMod        int64  `json:"lastmod,omitempty"`
}

// Event is an encoded record for the crawl's event stream (the record's
// JSON, as package events writes it).
type Event struct {
	Type events.Type     `json:"type"`
	Data json.RawMessage `json:"data"`
}

// CompleteResponse says which completions were acked (a lost lease is
// not) and, with a claim, its result.
type CompleteResponse struct {
	Acked []bool         `json:"acked"`
	Claim *ClaimResponse `json:"claim,omitempty"`
}

// ExtendRequest pushes the deadlines of held leases.
type ExtendRequest struct {
	Leases []LeaseRef `json:"leases"`
}

// ExtendResponse says which leases were still held.
type ExtendResponse struct {
	Held []bool `json:"held"`
}

// HeartbeatRequest is a slave's heartbeat (its Slave and Crawl are the
// token's, whatever the body says).
type HeartbeatRequest struct {
	Heartbeat events.Heartbeat `json:"heartbeat"`
}

// HeartbeatResponse carries the admin's requests to the slave, and
// whether the crawl is finished.
type HeartbeatResponse struct {
	Drain          bool     `json:"drain,omitempty"`
	RetiredProxies []string `json:"retired_proxies,omitempty"`
	Finished       bool     `json:"finished,omitempty"`
}

// LeaveRequest is a slave's graceful leave.
type LeaveRequest struct {
	Detail string `json:"detail,omitempty"`
}

// RulesResponse is the published rule set; Version "" when none.
type RulesResponse struct {
	Version string `json:"version"`
	Blob    []byte `json:"blob,omitempty"`
}

// RobotsResponse is a host's shared robots.txt record (GET PathRobots?host=).
type RobotsResponse struct {
	Found     bool   `json:"found"`
	FetchedAt int64  `json:"fetched_at,omitempty"`
	Status    int    `json:"status,omitempty"`
	Body      string `json:"body,omitempty"`
	TTLMs     int64  `json:"ttl_ms,omitempty"`
}

// EventsRequest publishes events that belong to no task (frontier.Publish).
type EventsRequest struct {
	Events []Event `json:"events"`
}

// WatchResponse is what GET PathWatch?rules=<version>&work=<seq> waits
// for (at most WatchWait): a rule set other than the one the slave has, or
// work queued from outside (seeds, a recrawl) since the announcement the
// slave last saw. Neither: come back. Seq counts this master's work
// announcements: the slave sends it back with its next watch, so an
// announcement between two watches is not missed (without it, the watch
// counts from its start).
type WatchResponse struct {
	Rules string `json:"rules,omitempty"`
	Work  bool   `json:"work,omitempty"`
	Seq   uint64 `json:"seq"`
}

// Error is the body of a refused request.
type Error struct {
	Error string `json:"error"`
}

// Decode reads one JSON value of v's type from r, at most limit bytes,
// refusing trailing data: a body is one request.
//
// Bodies are decoded by github.com/go-json-experiment/json (the JSON v2
// that Go ships as encoding/json/v2 under GOEXPERIMENT=jsonv2): about a
// third of encoding/json's time and allocations on a completion of 20
// pages (BenchmarkCodec), the largest part of what serving the API costs
// the master beyond the frontier's own work. They are read as
// encoding/json reads them, but for member names, which must be spelt as
// the types' tags spell them: invalid UTF-8 becomes U+FFFD, a repeated
// member's last value wins, an unknown member is ignored. Bodies are
// encoded by encoding/json, the faster of the two at writing them, but a
// slave's completions, which encode themselves (CompleteRequest.AppendJSON),
// and which the master, through DecodeBounded, decodes with a decoder of
// their own that reads them as this does (decodeComplete).
func Decode(r io.Reader, limit int64, v any) error {
	lr := &io.LimitedReader{R: r, N: limit + 1}
	err := jsonv2.UnmarshalRead(lr, v, decodeOpts)
	if lr.N <= 0 {
		return ErrTooLarge
	}
	if err != nil {
		return fmt.Errorf("decode request: %w", err)
	}
	return nil
}

// Unmarshal decodes a body already read (a response, on the slave), as
// Decode does.
func Unmarshal(data []byte, v any) error {
	return jsonv2.Unmarshal(data, v, decodeOpts) // its errors name JSON's place and Go's type
}

// decodeOpts: what encoding/json accepts and v2 would refuse by default.
var decodeOpts = jsonv2.JoinOptions(jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))

// ErrTooLarge is a body over its limit.
var ErrTooLarge = errors.New("request body too large")
