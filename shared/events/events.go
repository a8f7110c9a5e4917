// Package events defines the typed records that slaves and the master send
// through the crawl's Redis Stream to the master's event sink, which writes
// them to MySQL. Times are Unix milliseconds so Lua scripts can build them.
package events

import (
	"encoding/json"
	"fmt"
)

// Type names a record kind; it is the "type" field of a stream entry.
type Type string

const (
	TypePage      Type = "page"
	TypeException Type = "exception"
	TypeSlave     Type = "slave"
	TypeHeartbeat Type = "heartbeat"
	TypeLost      Type = "lost"
)

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
	KindRedirect     = "redirect" // redirect chain too long or invalid target
	KindBlocked      = "blocked"  // private network address refused
	KindFailed       = "failed"   // attempts exhausted
	KindOther        = "other"
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
	ContentHash string `json:"content_hash"` // hex SHA-256 of the body
	DurationMS  int64  `json:"duration_ms"`
	Attempt     int    `json:"attempt"`
	Links       int    `json:"links"`
}

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
	Crawl       string  `json:"crawl"`
	Slave       string  `json:"slave"`
	Host        string  `json:"host"`
	PID         int     `json:"pid"`
	At          int64   `json:"at"` // unix ms
	StartedAt   int64   `json:"started_at"`
	Pages       int64   `json:"pages"`
	Errors      int64   `json:"errors"`
	InFlight    int64   `json:"in_flight"`
	Bytes       int64   `json:"bytes"`
	RSS         int64   `json:"rss"`
	PagesPerSec float64 `json:"pages_per_sec"`
	Concurrency int     `json:"concurrency"`
	State       string  `json:"state"` // running, draining
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

// Envelope is one decoded stream entry.
type Envelope struct {
	ID        string // stream entry id, unique per crawl; makes inserts idempotent
	Type      Type
	Page      *Page
	Exception *Exception
	Slave     *Slave
	Heartbeat *Heartbeat
	Lost      *Lost
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
	default:
		return e, fmt.Errorf("decode event %s: unknown type %q", id, t)
	}
	if err := json.Unmarshal(data, target); err != nil {
		return e, fmt.Errorf("decode %s event %s: %w", t, id, err)
	}
	return e, nil
}
