package workapi

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/redcrawl/redcrawl/shared/events"
)

// decodeComplete is DecodeBounded for a completion request, the body the
// master decodes most and its largest CPU item per page: the body is read
// whole into a reused buffer, then walked token by token with a
// jsontext.Decoder, which validates it as JSON v2 does (nothing malformed
// gets past), each member decoded by code of its own instead of by
// reflection, each record's bound checked before the record is decoded
// (BenchmarkCodec: decode-bounded against decode-bounded-generic).
//
// It reads a body as decodeBoundedGeneric does (FuzzDecodeComplete checks
// it): decodeOpts, member names matched as spelt, unknown members
// skipped, a repeated member's last value (an object's merged into the
// former, as JSON v2 merges), null as JSON v2 reads it, the same kind of
// error at the same place. It reads only the common shapes itself: any
// other value (a string with an escape or invalid UTF-8, a number not a
// plain integer, a value of the wrong kind, null, the claim) goes to
// jsonv2.Unmarshal or UnmarshalDecode, so its meaning is JSON v2's by
// construction.
//
// One difference: a body over limit is always ErrTooLarge here, as it is
// read before it is decoded, where the generic path, which decodes as it
// reads, may fail first on an error in the bytes it has read by then.
func decodeComplete(r io.Reader, limit int64, v *CompleteRequest, b Bounds) error {
	d := completeDecoders.Get().(*completeDecoder)
	defer d.release()
	d.lr = io.LimitedReader{R: r, N: limit + 1}
	_, err := d.body.ReadFrom(&d.lr)
	d.lr.R = nil
	if d.lr.N <= 0 {
		return ErrTooLarge
	}
	if err != nil {
		return fmt.Errorf("decode request: read: %w", err)
	}
	d.dec.Reset(&d.body, decodeOpts) // reads from the body's bytes, copying none
	d.bounds, d.linksTotal, d.events = b, 0, 0
	err = d.request(v)
	if err == nil {
		err = d.end()
	}
	if err != nil {
		if tm := (*TooManyError)(nil); errors.As(err, &tm) {
			return tm
		}
		return fmt.Errorf("decode request: %w", err)
	}
	return nil
}

// completeDecoder is decodeComplete's state, kept for the next request
// (completeDecoders) with its buffers: the body, and a slice of each
// record type into which an array's records are decoded before they are
// copied to a slice of their exact number.
type completeDecoder struct {
	dec    jsontext.Decoder
	body   bytes.Buffer
	lr     io.LimitedReader // the body's reader, up to one byte past the limit
	bounds Bounds
	// linksTotal and events count the request's links and events so far.
	linksTotal, events int

	comps []Completion
	links []Link
	evs   []Event
	name  []byte // an escaped member name, unquoted
}

var completeDecoders = sync.Pool{New: func() any { return new(completeDecoder) }}

// Beyond these capacities a completeDecoder's buffers are not kept: a
// large body is rare, and must not hold its memory once decoded.
const (
	maxKeptBody    = 256 << 10
	maxKeptRecords = 1024
)

func (d *completeDecoder) release() {
	if d.body.Cap() > maxKeptBody {
		return // its decoder reads from the body's bytes: drop both
	}
	d.body.Reset()
	if cap(d.comps) > maxKeptRecords {
		d.comps = nil
	}
	if cap(d.links) > maxKeptRecords {
		d.links = nil
	}
	if cap(d.evs) > maxKeptRecords {
		d.evs = nil
	}
	completeDecoders.Put(d)
}

func (d *completeDecoder) request(v *CompleteRequest) error {
	return d.object(v, func(name []byte) error {
		switch string(name) {
		case "completions":
			return decodeArray(d, &v.Completions, &d.comps, d.moreCompletions, d.completion)
		case "claim":
			return jsonv2.UnmarshalDecode(&d.dec, &v.Claim) // once a request: not worth its own code
		}
		return d.dec.SkipValue()
	})
}

// end checks that nothing but white space follows the request.
func (d *completeDecoder) end() error {
	if d.dec.PeekKind() != 0 {
		return fmt.Errorf("a value after the request, at byte %d", d.dec.InputOffset())
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		return err
	}
	return nil
}

func (d *completeDecoder) completion(c *Completion) error {
	return d.object(c, func(name []byte) error {
		switch string(name) {
		case "lease":
			return d.leaseRef(&c.Lease)
		case "outcome":
			return d.str(&c.Outcome, outcomes)
		case "links":
			return decodeArray(d, &c.Links, &d.links, d.moreLinks, d.link)
		case "events":
			return decodeArray(d, &c.Events, &d.evs, d.moreEvents, d.event)
		case "host_delay_ms":
			return decodeInt(d, &c.HostDelayMs)
		case "backoff_ms":
			return decodeInt(d, &c.BackoffMs)
		case "retry_in_ms":
			return decodeInt(d, &c.RetryInMs)
		case "reason":
			return d.str(&c.Reason, nil)
		case "content_hash":
			return d.str(&c.ContentHash, nil)
		}
		return d.dec.SkipValue()
	})
}

func (d *completeDecoder) leaseRef(l *LeaseRef) error {
	return d.object(l, func(name []byte) error {
		switch string(name) {
		case "url":
			return d.str(&l.URL, nil)
		case "token":
			return decodeInt(d, &l.Token)
		case "shard":
			return decodeInt(d, &l.Shard)
		}
		return d.dec.SkipValue()
	})
}

func (d *completeDecoder) link(l *Link) error {
	return d.object(l, func(name []byte) error {
		switch string(name) {
		case "url":
			return d.str(&l.URL, nil)
		case "depth":
			return decodeInt(d, &l.Depth)
		case "hops":
			return decodeInt(d, &l.Hops)
		case "sitemap":
			return decodeInt(d, &l.Sitemap)
		case "sitemap_any_host":
			return d.bool(&l.SitemapAnyHost)
		case "lastmod":
			return decodeInt(d, &l.LastMod)
		}
		return d.dec.SkipValue()
	})
}

func (d *completeDecoder) event(e *Event) error {
	return d.object(e, func(name []byte) error {
		switch string(name) {
		case "type":
			return d.str((*string)(&e.Type), eventTypes)
		case "data":
			// json.RawMessage's UnmarshalJSON, which JSON v2 calls with
			// the value as read, null too: a copy of it.
			raw, err := d.dec.ReadValue()
			e.Data = append(json.RawMessage(nil), raw...)
			return err
		}
		return d.dec.SkipValue()
	})
}

// The bounds, as decodeBoundedGeneric checks them: before the record
// after the n first of its array.
func (d *completeDecoder) moreCompletions(n int) error {
	return moreOf(n, d.bounds.Completions, tooManyCompletions)
}

func (d *completeDecoder) moreLinks(n int) error { return d.bounds.moreLinks(n, &d.linksTotal) }

func (d *completeDecoder) moreEvents(int) error {
	d.events++
	return moreOf(d.events-1, d.bounds.Events, tooManyEvents)
}

// object reads a JSON object into *p, member reading the value of each
// member by its name; anything but an object (null, a value of another
// kind) is JSON v2's to read.
func (d *completeDecoder) object(p any, member func(name []byte) error) error {
	if d.dec.PeekKind() != '{' {
		return jsonv2.UnmarshalDecode(&d.dec, p)
	}
	if _, err := d.dec.ReadToken(); err != nil {
		return err
	}
	for d.dec.PeekKind() != '}' {
		raw, err := d.dec.ReadValue()
		if err != nil {
			return err
		}
		if err := member(d.memberName(raw)); err != nil {
			return err
		}
	}
	_, err := d.dec.ReadToken()
	return err
}

// memberName is a member's name, raw as read: unquoted, and valid until
// the next read.
func (d *completeDecoder) memberName(raw []byte) []byte {
	in := raw[1 : len(raw)-1]
	if !slices.Contains(in, '\\') {
		return in // as it is, invalid UTF-8 too: no name of ours has any
	}
	var err error
	if d.name, err = jsontext.AppendUnquote(d.name[:0], raw); err != nil {
		return nil // invalid UTF-8, which JSON v2 replaces: no name of ours
	}
	return d.name
}

// decodeArray reads a JSON array (or null) into *v as readSlice does for
// the generic path: more(n) checks a bound before each element after n
// others, elem decodes the element. The elements are decoded into buf,
// the decoder's own slice for T, then copied to *v, reset to its length 0
// (nil stays nil): one allocation for them, where appending would grow
// *v several times.
func decodeArray[T any](d *completeDecoder, v *[]T, buf *[]T, more func(int) error, elem func(*T) error) error {
	switch d.dec.PeekKind() {
	case 'n':
		_, err := d.dec.ReadToken()
		*v = nil
		return err
	case '[':
	default:
		return jsonv2.UnmarshalDecode(&d.dec, v) // JSON v2's error
	}
	s, err := decodeElems(d, (*buf)[:0], more, elem)
	if err == nil {
		*v = append((*v)[:0], s...)
	}
	clear(s) // holds nothing for the next request
	*buf = s[:0]
	return err
}

// decodeElems appends an array's elements to s, from its '[' to its ']'.
func decodeElems[T any](d *completeDecoder, s []T, more func(int) error, elem func(*T) error) ([]T, error) {
	if _, err := d.dec.ReadToken(); err != nil {
		return s, err
	}
	for d.dec.PeekKind() != ']' {
		if err := more(len(s)); err != nil {
			return s, err
		}
		var zero T
		s = append(s, zero)
		if err := elem(&s[len(s)-1]); err != nil {
			return s, err
		}
	}
	_, err := d.dec.ReadToken()
	return s, err
}

// The values of a completion's outcome and of an event's type: read as
// these strings rather than new ones.
var (
	outcomes   = []string{OutcomeDone, OutcomeRetry, OutcomeFail, OutcomeRelease}
	eventTypes = []string{string(events.TypePage), string(events.TypeItem), string(events.TypeException),
		string(events.TypeDuplicate), string(events.TypeLost), string(events.TypeProxy),
		string(events.TypeSlave), string(events.TypeHeartbeat)}
)

// str reads a JSON string into *s: one of known if it is one, else a new
// string (the body's buffer is reused); anything but a string of valid
// UTF-8 without escapes is JSON v2's to read.
func (d *completeDecoder) str(s *string, known []string) error {
	raw, err := d.dec.ReadValue()
	if err != nil {
		return err
	}
	if raw.Kind() != '"' || !plain(raw[1:len(raw)-1]) {
		return jsonv2.Unmarshal(raw, s, decodeOpts)
	}
	in := raw[1 : len(raw)-1]
	for _, k := range known {
		if string(in) == k {
			*s = k
			return nil
		}
	}
	*s = string(in)
	return nil
}

// plain reports whether a JSON string's content reads as it is: valid
// UTF-8 without escapes. It looks at 8 bytes at a time for a '\\' or a
// byte past ASCII (a URL has neither), then at the rest one by one.
func plain(in []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(in) >= 8 {
		w := binary.LittleEndian.Uint64(in)
		x := w ^ (ones * '\\') // a zero byte where w has a '\\'
		if (w|(x-ones)&^x)&highs != 0 {
			break
		}
		in = in[8:]
	}
	for i, c := range in {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			return bytes.IndexByte(in[i:], '\\') < 0 && utf8.Valid(in[i:])
		}
	}
	return true
}

// decodeInt reads a JSON integer into *p; anything but one of at most 18
// digits that fits (a null, a fraction, an exponent, a value of another
// kind) is JSON v2's to read.
func decodeInt[T int | int64](d *completeDecoder, p *T) error {
	raw, err := d.dec.ReadValue()
	if err != nil {
		return err
	}
	if n, ok := parseInt(raw); ok && int64(T(n)) == n {
		*p = T(n)
		return nil
	}
	return jsonv2.Unmarshal(raw, p, decodeOpts)
}

// parseInt parses a JSON number that is an integer of at most 18 digits,
// so that it cannot overflow an int64.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// bool reads true or false into *p; anything else is JSON v2's to read.
func (d *completeDecoder) bool(p *bool) error {
	raw, err := d.dec.ReadValue()
	if err != nil {
		return err
	}
	switch string(raw) {
	case "true":
		*p = true
	case "false":
		*p = false
	default:
		return jsonv2.Unmarshal(raw, p, decodeOpts)
	}
	return nil
}
