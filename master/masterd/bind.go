package masterd

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redcrawl/redcrawl/shared/events"
)

// The sink stores an event for the crawl and the slave of the stream it
// was read from, never for those its body names: a slave's Redis user may
// write only its own stream (crawl:{name}:s:<slave>:ev), so the stream is
// the one thing a stolen slave cannot lie about. An event whose body
// disagrees with its stream is a forgery: it is not stored, and a
// forged_event exception takes its place (forgedException).

// maxAhead is how far ahead of the master's clock the time of an event
// from a slave's stream may be, once bound to the time its entry was
// written (source.written): an item or a page dated in the future would
// win over every real fetch of its URL until that date (items,
// page_validators). An honest slave's fast clock never gets that far: its
// records are dated no later than Redis wrote them; only an entry id a
// slave chose itself (its Redis user may XADD to its own stream) can be.
const maxAhead = 5 * time.Minute

// maxQuoted is the most bytes of a forged value a forged_event message
// quotes.
const maxQuoted = 64

// source is where an event came from.
type source struct {
	// crawl is the sink's crawl: every stream it reads is that crawl's
	// (a sharded crawl's shards' too).
	crawl string
	// slave is the slave whose own stream it is; "" for the crawl's own
	// stream, which only the master and its scripts write.
	slave string
	// written is when Redis appended the entry (unix ms, its id's time,
	// Redis's clock); 0 when the id says nothing.
	written int64
}

// sourceOf returns the source of an entry of crawl's streams by its
// frontier.Entry.StreamID: "<slave>/<id>" for a slave's stream,
// "<slave>~<k>/<id>" for one of shard k's, "~<k>/<id>" or "<id>" for the
// crawl's own.
func sourceOf(crawl, streamID string) source {
	tag, id, ok := strings.Cut(streamID, "/")
	if !ok {
		return source{crawl: crawl, written: idTime(streamID)}
	}
	slave, _, _ := strings.Cut(tag, "~")
	return source{crawl: crawl, slave: slave, written: idTime(id)}
}

// idTime is the time of a stream entry id ("<ms>-<seq>"), 0 if it has
// none.
func idTime(id string) int64 {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// forgery is why an event may not be stored: the field of its record that
// disagrees with where it came from.
type forgery struct {
	field string // crawl, slave, or the time's name (fetched_at, at)
	msg   string // what is wrong, values quoted and capped
	slave string // the slave to record it for: the stream's, else the record's
}

// bound are the fields of one record that must match its source.
type bound struct {
	crawl, slave *string
	at           *int64 // the record's time: what ordering and replacement go by
	atName       string
}

// boundFields lists the bound fields of every record env holds.
func boundFields(env *events.Envelope) []bound {
	var out []bound
	if x := env.Page; x != nil {
		out = append(out, bound{&x.Crawl, &x.Slave, &x.FetchedAt, "fetched_at"})
	}
	if x := env.Exception; x != nil {
		out = append(out, bound{&x.Crawl, &x.Slave, &x.At, "at"})
	}
	if x := env.Slave; x != nil {
		out = append(out, bound{&x.Crawl, &x.Slave, &x.At, "at"})
	}
	if x := env.Heartbeat; x != nil {
		out = append(out, bound{&x.Crawl, &x.Slave, &x.At, "at"})
	}
	if x := env.Lost; x != nil {
		out = append(out, bound{&x.Crawl, &x.Slave, &x.DetectedAt, "detected_at"})
	}
	if x := env.Proxy; x != nil {
		out = append(out, bound{&x.Crawl, &x.Slave, &x.At, "at"})
	}
	if x := env.Duplicate; x != nil {
		out = append(out, bound{&x.Crawl, &x.Slave, &x.At, "at"})
	}
	if x := env.Item; x != nil {
		out = append(out, bound{&x.Crawl, &x.Slave, &x.FetchedAt, "fetched_at"})
	}
	return out
}

// bind checks env's records against src and fills the crawl and slave a
// record leaves empty with src's. Every record must name src's crawl; a
// record from a slave's stream must also name that slave, and its time is
// its slave's clock, so it is taken as no later than when Redis wrote its
// entry (src.written): a slave whose clock runs minutes fast has its
// records dated by Redis's, not refused. That time must be at most
// maxAhead after now. The crawl's own stream is the master's: its records
// may name any slave (a lost lease, a death) and any time. bind returns
// nil when env may be stored, else why not (and changes nothing).
func bind(env *events.Envelope, src source, now time.Time) *forgery {
	fs := boundFields(env)
	for _, f := range fs {
		who := src.slave
		if who == "" {
			who = *f.slave
		}
		if *f.crawl != "" && *f.crawl != src.crawl {
			return &forgery{field: "crawl", slave: who,
				msg: fmt.Sprintf("crawl %s is not the stream's %s", quote(*f.crawl), quote(src.crawl))}
		}
		if src.slave == "" {
			continue
		}
		if *f.slave != "" && *f.slave != src.slave {
			return &forgery{field: "slave", slave: who,
				msg: fmt.Sprintf("slave %s is not the stream's %s", quote(*f.slave), quote(src.slave))}
		}
		if at, limit := src.dated(*f.at), now.Add(maxAhead).UnixMilli(); at > limit {
			return &forgery{field: f.atName, slave: who,
				msg: fmt.Sprintf("%s %d is %s ahead of the master's clock (at most %s)", f.atName, at,
					ahead(at, now), maxAhead)}
		}
	}
	for _, f := range fs {
		if src.slave != "" {
			*f.at = src.dated(*f.at)
		}
		if *f.crawl == "" {
			*f.crawl = src.crawl
		}
		if *f.slave == "" {
			*f.slave = src.slave
		}
	}
	return nil
}

// dated is a slave's record's time at, no later than its entry was
// written.
func (src source) dated(at int64) int64 {
	if src.written > 0 && at > src.written {
		return src.written
	}
	return at
}

// ahead says how far ms, a time after now, is ahead of now: to the
// second, in hours past a day (a forged time may be centuries ahead).
func ahead(ms int64, now time.Time) string {
	d := ms - now.UnixMilli()
	if day := (24 * time.Hour).Milliseconds(); d > day {
		return strconv.FormatInt(d/time.Hour.Milliseconds(), 10) + "h"
	}
	return (time.Duration(d) * time.Millisecond).Truncate(time.Second).String()
}

// forgedException is the forged_event exception stored in place of the
// event env, for src's crawl and the slave fg names, under env's id (so a
// redelivered entry still gives one row).
func forgedException(env events.Envelope, src source, fg *forgery, now time.Time) events.Envelope {
	return events.Envelope{ID: env.ID, Type: events.TypeException, Exception: &events.Exception{
		Crawl: src.crawl, Kind: events.KindForgedEvent, Slave: fg.slave, At: now.UnixMilli(),
		Message: fmt.Sprintf("%s event %s not stored: %s", env.Type, env.ID, fg.msg),
	}}
}

// quote quotes s in Go syntax (no control character gets through), cut to
// its first maxQuoted bytes.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}
