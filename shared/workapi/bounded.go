package workapi

import (
	"errors"
	"fmt"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Bounds cap how many records of each kind one request body may hold.
// DecodeBounded checks them while it decodes, so a body over one is
// refused when the first record too many is met, never held whole: what a
// decoded body costs the master is bounded by its bytes and these counts.
// A zero bound is no bound.
type Bounds struct {
	// Completions is the most completions of a request.
	Completions int
	// Links is the most links of one completion; LinksTotal of a request.
	Links, LinksTotal int
	// Events is the most events of a request (its completions' together).
	Events int
	// Leases is the most lease references of an extend.
	Leases int
}

// TooManyError is a body over one of its Bounds.
type TooManyError struct {
	What  string // "completions", "links in a completion", ...
	Limit int
}

func (e *TooManyError) Error() string { return fmt.Sprintf("more than %d %s", e.Limit, e.What) }

// What a TooManyError says of each bound but links'.
const (
	tooManyCompletions = "completions"
	tooManyEvents      = "events in a request"
	tooManyLeases      = "leases"
)

// DecodeBounded is Decode with b's bounds checked as the body is read: a
// body over one fails with a *TooManyError. A *CompleteRequest, the
// master's most frequent and largest body, is read by decodeComplete, a
// decoder of its own (completedec.go); any other v by decodeBoundedGeneric.
func DecodeBounded(r io.Reader, limit int64, v any, b Bounds) error {
	if req, ok := v.(*CompleteRequest); ok && req != nil {
		return decodeComplete(r, limit, req, b)
	}
	return decodeBoundedGeneric(r, limit, v, b)
}

// decodeBoundedGeneric is DecodeBounded for any v: JSON v2 with a
// function of its own for each bounded slice type.
func decodeBoundedGeneric(r io.Reader, limit int64, v any, b Bounds) error {
	var linksTotal, events int
	fns := jsonv2.JoinUnmarshalers(
		jsonv2.UnmarshalFromFunc(boundedSlice[Completion](nil, b.Completions, tooManyCompletions)),
		jsonv2.UnmarshalFromFunc(boundedLinks(&linksTotal, b)),
		jsonv2.UnmarshalFromFunc(boundedSlice[Event](&events, b.Events, tooManyEvents)),
		jsonv2.UnmarshalFromFunc(boundedSlice[LeaseRef](nil, b.Leases, tooManyLeases)),
	)
	lr := &io.LimitedReader{R: r, N: limit + 1}
	err := jsonv2.UnmarshalRead(lr, v, decodeOpts, jsonv2.WithUnmarshalers(fns))
	if lr.N <= 0 {
		return ErrTooLarge
	}
	if err != nil {
		if tm := (*TooManyError)(nil); errors.As(err, &tm) {
			return tm
		}
		return fmt.Errorf("decode request: %w", err)
	}
	return nil
}

// boundedLinks reads a completion's links: at most b.Links of them, and
// at most b.LinksTotal with the request's others (counted in total).
func boundedLinks(total *int, b Bounds) func(*jsontext.Decoder, *[]Link) error {
	return func(dec *jsontext.Decoder, v *[]Link) error {
		return readSlice(dec, v, func(n int) error { return b.moreLinks(n, total) })
	}
}

// moreLinks checks a completion's link after its n first, *total the
// request's links so far, and counts it in *total.
func (b Bounds) moreLinks(n int, total *int) error {
	if b.Links > 0 && n >= b.Links {
		return &TooManyError{What: "links in a completion", Limit: b.Links}
	}
	if b.LinksTotal > 0 && *total >= b.LinksTotal {
		return &TooManyError{What: "links in a request", Limit: b.LinksTotal}
	}
	*total++
	return nil
}

// boundedSlice reads a slice of at most limit elements, counted in
// *count with the request's others when count is set.
func boundedSlice[T any](count *int, limit int, what string) func(*jsontext.Decoder, *[]T) error {
	return func(dec *jsontext.Decoder, v *[]T) error {
		return readSlice(dec, v, func(n int) error {
			if count != nil {
				n = *count
				*count++
			}
			return moreOf(n, limit, what)
		})
	}
}

// moreOf checks a record after n others of its kind against limit.
func moreOf(n, limit int, what string) error {
	if limit > 0 && n >= limit {
		return &TooManyError{What: what, Limit: limit}
	}
	return nil
}

// readSlice reads a JSON array (or null) into v element by element,
// asking more (with the count read so far) before each.
func readSlice[T any](dec *jsontext.Decoder, v *[]T, more func(n int) error) error {
	switch dec.PeekKind() {
	case 'n':
		if _, err := dec.ReadToken(); err != nil {
			return err
		}
		*v = nil
		return nil
	case '[':
	default:
		return jsonv2.SkipFunc // not an array: the default's type error
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	out := (*v)[:0]
	for dec.PeekKind() != ']' {
		if err := more(len(out)); err != nil {
			return err
		}
		var e T
		if err := jsonv2.UnmarshalDecode(dec, &e); err != nil {
			return err
		}
		out = append(out, e)
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	*v = out
	return nil
}
