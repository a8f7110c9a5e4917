package workapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// tightBounds are bounds small enough for a short body to pass each.
var tightBounds = Bounds{Completions: 3, Links: 2, LinksTotal: 3, Events: 2, Leases: 2}

// errKind is what DecodeBounded's callers tell apart in an error: a
// bound (which, and its limit), the byte limit, or any other decode error.
func errKind(err error) string {
	var tm *TooManyError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &tm):
		return fmt.Sprintf("more than %d %s", tm.Limit, tm.What)
	case errors.Is(err, ErrTooLarge):
		return "too large"
	}
	return "decode"
}

// decodeBoth decodes body into a fresh copy of start by decodeComplete
// and by the generic path.
func decodeBoth(body []byte, limit int64, b Bounds, start func() CompleteRequest) (fast, generic CompleteRequest, errFast, errGeneric error) {
	fast, generic = start(), start()
	errFast = decodeComplete(bytes.NewReader(body), limit, &fast, b)
	errGeneric = decodeBoundedGeneric(bytes.NewReader(body), limit, &generic, b)
	return fast, generic, errFast, errGeneric
}

func zeroRequest() CompleteRequest { return CompleteRequest{} }

func marshalJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeComplete(t *testing.T) {
	bench := marshalJSON(t, completeBody(20))
	c := func(cs ...Completion) CompleteRequest { return CompleteRequest{Completions: cs} }
	for _, tc := range []struct {
		name    string
		body    string
		limit   int64 // 0: the body's length
		bounds  Bounds
		want    CompleteRequest
		wantErr string // errKind's
	}{
		{name: "make bench's 20 pages", body: string(bench), bounds: benchBounds, want: completeBody(20)},
		{name: "null", body: ` null `, want: CompleteRequest{}},
		{name: "nulls", body: `{"completions":[null,{"lease":null,"outcome":null,"links":null,"events":[null,{"type":null,"data":null}],
			"host_delay_ms":null,"reason":null}],"claim":null}`,
			want: c(Completion{}, Completion{Events: []Event{{}, {Data: json.RawMessage("null")}}})},
		{name: "empty arrays are nil", body: `{"completions":[{"links":[],"events":[]}]}`, want: c(Completion{})},
		{name: "repeated members: the last wins, objects merge",
			body: `{"completions":[{"lease":{"url":"a","token":1},"lease":{"token":2},"outcome":"done","outcome":"fail",
				"links":[{"url":"x"}],"links":[{"url":"y","depth":1,"depth":3}]}],"claim":{"max":1},"claim":{"render":true}}`,
			want: CompleteRequest{Completions: []Completion{{Lease: LeaseRef{URL: "a", Token: 2}, Outcome: OutcomeFail,
				Links: []Link{{URL: "y", Depth: 3}}}}, Claim: &ClaimRequest{Max: 1, Render: true}}},
		{name: "escapes, invalid UTF-8",
			body: "{\"completions\":[{\"lease\":{\"u\\u0072l\":\"http://a.test/\\u00e9\\n\"},\"reason\":\"bad \xff end\"," +
				"\"content_hash\":\"\\ud800\",\"events\":[{\"type\":\"p\\u0061ge\",\"data\":{\"k\" : \"\xff\\n\"}}]}]}",
			want: c(Completion{Lease: LeaseRef{URL: "http://a.test/é\n"}, Reason: "bad \ufffd end", ContentHash: "\ufffd",
				Events: []Event{{Type: "page", Data: json.RawMessage("{\"k\" : \"\xff\\n\"}")}}})},
		{name: "names as spelt, unknown members skipped",
			body: `{"Completions":[{}],"completions":[{"URL":"x","lease":{"URL":"y","url":"z","extra":[1,{"a":2}]},
				"note":{"deep":[true]}}],"other":null}`,
			want: c(Completion{Lease: LeaseRef{URL: "z"}})},
		{name: "integers of any size",
			body: `{"completions":[{"lease":{"token":-0,"shard":7},"host_delay_ms":123456789012345678,
				"backoff_ms":9223372036854775807,"retry_in_ms":-9223372036854775808,
				"links":[{"url":"l","hops":1,"sitemap":2,"sitemap_any_host":true,"lastmod":-1}]}]}`,
			want: c(Completion{Lease: LeaseRef{Shard: 7}, HostDelayMs: 123456789012345678, BackoffMs: 1<<63 - 1, RetryInMs: -1 << 63,
				Links: []Link{{URL: "l", Hops: 1, Sitemap: 2, SitemapAnyHost: true, LastMod: -1}}})},
		{name: "a fraction", body: `{"completions":[{"lease":{"token":1.0}}]}`, wantErr: "decode"},
		{name: "an integer too large", body: `{"completions":[{"lease":{"token":9223372036854775808}}]}`, wantErr: "decode"},
		{name: "a string for a number", body: `{"completions":[{"lease":{"token":"1"}}]}`, wantErr: "decode"},
		{name: "a string for a bool", body: `{"completions":[{"links":[{"sitemap_any_host":"true"}]}]}`, wantErr: "decode"},
		{name: "a number for a string", body: `{"completions":[{"outcome":1}]}`, wantErr: "decode"},
		{name: "an object for links", body: `{"completions":[{"links":{}}]}`, wantErr: "decode"},
		{name: "a string for a completion", body: `{"completions":["done"]}`, wantErr: "decode"},
		{name: "an array for the request", body: `[]`, wantErr: "decode"},
		{name: "empty", body: ``, wantErr: "decode"},
		{name: "a second value", body: `{} {}`, wantErr: "decode"},
		{name: "trailing garbage", body: `{}]`, wantErr: "decode"},
		{name: "a syntax error", body: `{"completions":[{"outcome":"done",}]}`, wantErr: "decode"},
		{name: "over the byte limit", body: string(bench), limit: int64(len(bench)) - 1, bounds: benchBounds, wantErr: "too large"},
		{name: "completions", body: `{"completions":[{},{},{},{}]}`, bounds: tightBounds, wantErr: "more than 3 completions"},
		{name: "a bound met before a syntax error", body: `{"completions":[{},{},{},`, bounds: tightBounds,
			wantErr: "more than 3 completions"},
		{name: "links in a completion", body: `{"completions":[{"links":[{},{},{}]}]}`, bounds: tightBounds,
			wantErr: "more than 2 links in a completion"},
		{name: "links in a request", body: `{"completions":[{"links":[{},{}]},{"links":[{},null]}]}`, bounds: tightBounds,
			wantErr: "more than 3 links in a request"},
		{name: "events in a request", body: `{"completions":[{"events":[{}]},{"events":[{},{}]}]}`, bounds: tightBounds,
			wantErr: "more than 2 events in a request"},
		{name: "within every bound", body: `{"completions":[{"links":[{},{}],"events":[{}]},{"links":[{}],"events":[{}]},{}]}`,
			bounds: tightBounds, want: c(Completion{Links: []Link{{}, {}}, Events: []Event{{}}},
				Completion{Links: []Link{{}}, Events: []Event{{}}}, Completion{})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = int64(len(tc.body))
			}
			fast, generic, errFast, errGeneric := decodeBoth([]byte(tc.body), limit, tc.bounds, zeroRequest)
			if got := errKind(errFast); got != tc.wantErr {
				t.Fatalf("error %q (%v), want %q", got, errFast, tc.wantErr)
			}
			if got := errKind(errGeneric); got != tc.wantErr {
				t.Fatalf("generic path: error %q (%v), want %q", got, errGeneric, tc.wantErr)
			}
			if tc.wantErr != "" {
				return
			}
			if d := cmp.Diff(tc.want, fast); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if d := cmp.Diff(generic, fast); d != "" {
				t.Errorf("(-generic path +got):\n%s", d)
			}
		})
	}
}

// TestDecodeCompleteMerges decodes into a request already filled, as
// JSON v2 does: slices reset (an empty array leaves an empty one, not
// nil), the claim merged, null the zero request.
func TestDecodeCompleteMerges(t *testing.T) {
	filled := func() CompleteRequest {
		return CompleteRequest{Completions: []Completion{{Outcome: OutcomeDone}}, Claim: &ClaimRequest{Max: 5}}
	}
	for _, tc := range []struct {
		name, body string
		want       CompleteRequest
	}{
		{"an empty object", `{}`, filled()},
		{"no completions", `{"completions":[]}`, CompleteRequest{Completions: []Completion{}, Claim: &ClaimRequest{Max: 5}}},
		{"other completions, a claim", `{"completions":[{"reason":"r"}],"claim":{"render":true}}`,
			CompleteRequest{Completions: []Completion{{Reason: "r"}}, Claim: &ClaimRequest{Max: 5, Render: true}}},
		{"null", `null`, CompleteRequest{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fast, generic, errFast, errGeneric := decodeBoth([]byte(tc.body), 1<<20, Bounds{}, filled)
			if errFast != nil || errGeneric != nil {
				t.Fatalf("errors %v (generic path: %v)", errFast, errGeneric)
			}
			if d := cmp.Diff(tc.want, fast); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if d := cmp.Diff(generic, fast); d != "" {
				t.Errorf("(-generic path +got):\n%s", d)
			}
		})
	}
}

// TestDecodeCompleteOwnsItsStrings decodes a body, then others of the
// same length, which reuse the buffer it was read into: what the first
// gave must not change.
func TestDecodeCompleteOwnsItsStrings(t *testing.T) {
	body := marshalJSON(t, completeBody(3))
	var first CompleteRequest
	if err := DecodeBounded(bytes.NewReader(body), 1<<20, &first, benchBounds); err != nil {
		t.Fatal(err)
	}
	other := bytes.ReplaceAll(body, []byte("h0"), []byte("x9"))
	for range 3 {
		var r CompleteRequest
		if err := DecodeBounded(bytes.NewReader(other), 1<<20, &r, benchBounds); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff(completeBody(3), first); d != "" {
		t.Errorf("changed by the next decodes (-want +got):\n%s", d)
	}
}

// FuzzDecodeComplete checks decodeComplete against the generic path on
// any body: the same value, or errors of the same kind. A body over the
// limit is ErrTooLarge for decodeComplete, an error for the generic path
// (whose kind depends on how far it had read).
func FuzzDecodeComplete(f *testing.F) {
	for _, n := range []int{0, 1, 3} {
		f.Add(marshalJSON(f, completeBody(n)), false, uint8(0), false)
	}
	f.Add(marshalJSON(f, completeBody(2)), false, uint8(1), false)
	for _, body := range []string{
		`null`, ``, `[]`, `{} {}`, `{}x`, `{"completions":null,"claim":null}`,
		`{"completions":[{},{},{},{}]}`,
		`{"completions":[{"links":[{},{},{}]}]}`,
		`{"completions":[{"links":[{},{}]},{"links":[{},null]}]}`,
		`{"completions":[{"events":[{}]},{"events":[{},{}]}]}`,
		`{"completions":[{},{},{},`,
		`{"completions":[null,{"lease":null,"outcome":null,"links":null,"events":[null,{"type":null,"data":null}]}]}`,
		`{"completions":[{"lease":{"url":"a","token":1},"lease":{"token":2},"links":[{"url":"x"}],"links":[]}],"claim":{"max":1},"claim":{"render":true}}`,
		"{\"completions\":[{\"lease\":{\"u\\u0072l\":\"\\u00e9\\n\"},\"reason\":\"\xff\",\"content_hash\":\"\\ud800\",\"events\":[{\"type\":\"p\\u0061ge\",\"data\":{\"k\":\"\xff\"}}]}]}",
		`{"Completions":[{}],"completions":[{"URL":"x","lease":{"URL":"y","url":"z"},"note":{"deep":[true]}}]}`,
		`{"completions":[{"lease":{"token":-0,"shard":1.5}}]}`,
		`{"completions":[{"lease":{"token":"1"},"links":[{"sitemap_any_host":"true","depth":99999999999999999999}]}]}`,
		`{"completions":[{"links":{}}]}`, `{"completions":["done"]}`, `{"completions":{}}`,
		`{"completions":[{"outcome":1,"backoff_ms":true}]}`,
	} {
		f.Add([]byte(body), true, uint8(0), false)
		f.Add([]byte(body), true, uint8(0), true)
	}
	prefilled := func() CompleteRequest {
		return CompleteRequest{Completions: []Completion{{Outcome: OutcomeDone, Links: []Link{{URL: "u"}}}}, Claim: &ClaimRequest{Max: 5}}
	}
	f.Fuzz(func(t *testing.T, body []byte, tight bool, cut uint8, prefill bool) {
		b, start, limit := benchBounds, zeroRequest, int64(len(body))-int64(cut%4)
		if tight {
			b = tightBounds
		}
		if prefill {
			start = prefilled
		}
		fast, generic, errFast, errGeneric := decodeBoth(body, limit, b, start)
		if int64(len(body)) > limit {
			if !errors.Is(errFast, ErrTooLarge) || errGeneric == nil {
				t.Fatalf("over the limit: error %v, generic path's %v", errFast, errGeneric)
			}
			return
		}
		if kf, kg := errKind(errFast), errKind(errGeneric); kf != kg {
			t.Fatalf("error %q (%v), generic path's %q (%v)", kf, errFast, kg, errGeneric)
		}
		if errFast == nil {
			if d := cmp.Diff(generic, fast); d != "" {
				t.Fatalf("(-generic path +got):\n%s", d)
			}
		}
	})
}

// FuzzPlain checks plain's 8 bytes at a time against its definition.
func FuzzPlain(f *testing.F) {
	for _, s := range []string{"", "http://a.test/page/1", `http://a.test/\"`, "0123456\\", "01234567é", "01234567\xff", "\xe2\x82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := plain([]byte(s)), !strings.Contains(s, `\`) && utf8.ValidString(s); got != want {
			t.Fatalf("plain(%q) = %v, want %v", s, got, want)
		}
	})
}
