package workapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// marshalPlain is encoding/json's encoding of v without its HTML escapes:
// what AppendJSON must write, byte for byte, when events' data is compact.
func marshalPlain(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestAppendJSON(t *testing.T) {
	full := completeBody(3)
	full.Completions[1] = Completion{
		Lease:       LeaseRef{URL: "http://a.test/x?q=\"1\"&b=<2>", Token: -7, Shard: 3},
		Outcome:     OutcomeRetry,
		Links:       []Link{{URL: "http://a.test/\u2028\u2029é", Depth: 1, Hops: 2, Sitemap: 1, SitemapAnyHost: true, LastMod: 1795403045380}},
		HostDelayMs: 1500, BackoffMs: 2, RetryInMs: 30000,
		Reason:      "bad\x00\x01\x1f\b\f\n\r\t\\ \xff\xfe end \xe2\x82",
		ContentHash: "1e1317a5bac7e063",
	}
	full.Claim.Render = true
	for _, tc := range []struct {
		name string
		req  CompleteRequest
	}{
		{"empty", CompleteRequest{}},
		{"no completions, a claim", CompleteRequest{Completions: []Completion{}, Claim: &ClaimRequest{Max: 8}}},
		{"a bare completion", CompleteRequest{Completions: []Completion{{}}}},
		{"an event without data", CompleteRequest{Completions: []Completion{{Events: []Event{{Type: "page"}}}}}},
		{"every field, escapes", full},
		{"make bench's 20 pages", completeBody(20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.req.AppendJSON(nil)
			if want := marshalPlain(t, tc.req); !bytes.Equal(got, want) {
				t.Errorf("AppendJSON:\n%s\nencoding/json:\n%s", got, want)
			}
			var back CompleteRequest
			if err := Unmarshal(got, &back); err != nil {
				t.Fatalf("decode: %v", err)
			}
			var want CompleteRequest
			if err := json.Unmarshal(marshalPlain(t, tc.req), &want); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, back); d != "" {
				t.Errorf("decoded (-encoding/json +AppendJSON):\n%s", d)
			}
		})
	}
}

// FuzzAppendJSON checks AppendJSON against encoding/json for any strings
// a page can put in a completion (its URL, links, reason).
func FuzzAppendJSON(f *testing.F) {
	f.Add("http://a.test/", "http://a.test/b", "timeout", int64(3), 2)
	f.Add("\xff<>&\u2028", "\x00\"\\", "\xe2\x82", int64(-1), 0)
	f.Fuzz(func(t *testing.T, u, link, reason string, token int64, depth int) {
		req := CompleteRequest{
			Completions: []Completion{{
				Lease:   LeaseRef{URL: u, Token: token},
				Outcome: OutcomeFail,
				Links:   []Link{{URL: link, Depth: depth}},
				Events:  []Event{{Type: "page", Data: json.RawMessage(`{"url":"x"}`)}},
				Reason:  reason,
			}},
			Claim: &ClaimRequest{Max: depth},
		}
		got := req.AppendJSON(nil)
		if want := marshalPlain(t, req); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON:\n%q\nencoding/json:\n%q", got, want)
		}
	})
}

// TestAppendJSONEveryField fills every field of a completion, however
// deep, so that a field added to these types and not to AppendJSON fails
// here rather than vanish from what slaves send.
func TestAppendJSONEveryField(t *testing.T) {
	var req CompleteRequest
	fill(reflect.ValueOf(&req).Elem())
	if req.Claim == nil || len(req.Completions) == 0 || len(req.Completions[0].Links) == 0 || req.Completions[0].Links[0].LastMod == 0 {
		t.Fatalf("fill left fields empty: %+v", req)
	}
	if got, want := req.AppendJSON(nil), marshalPlain(t, req); !bytes.Equal(got, want) {
		t.Errorf("AppendJSON misses a field:\n%s\nencoding/json:\n%s", got, want)
	}
}

// fill sets every field of v to a value other than its zero: one element
// for a slice, a filled value for a pointer, a small JSON object for raw
// JSON.
func fill(v reflect.Value) {
	if v.Type() == reflect.TypeFor[json.RawMessage]() {
		v.SetBytes([]byte(`{"k":1}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s<&>" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	default:
		panic("fill: a field of kind " + v.Kind().String() + ": teach fill and AppendJSON")
	}
}
