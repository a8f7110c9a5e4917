package admin

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/redcrawl/redcrawl/shared/urlx"
)

// getEndpoints are the GET API endpoints the query fuzzer targets; the
// fuzzer picks one by index.
var getEndpoints = []string{
	"/api/v1/exceptions",
	"/api/v1/series",
	"/api/v1/lost",
	"/api/v1/proxies",
	"/api/v1/overview",
	"/api/v1/sd",
}

// checkAPIResponse checks what every API answer to bad input must be: 200
// or 4xx, never 5xx; a JSON body; a 4xx body {"error": "<message>"}. It
// returns the body.
func checkAPIResponse(t *testing.T, what string, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: read body: %v", what, err)
	}
	if resp.StatusCode != http.StatusOK && (resp.StatusCode < 400 || resp.StatusCode > 499) {
		t.Fatalf("%s: status %d, want 200 or 4xx; body %s", what, resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q, want JSON", what, ct)
	}
	if !json.Valid(body) {
		t.Fatalf("%s: body is not JSON: %q", what, body)
	}
	if resp.StatusCode != http.StatusOK {
		var eb errorBody
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&eb); err != nil || strings.TrimSpace(eb.Error) == "" {
			t.Fatalf("%s: status %d body %q is not {\"error\": message} (%v)", what, resp.StatusCode, body, err)
		}
	}
	return body
}

// FuzzGetQuery sends a raw query string to each GET endpoint through the
// real handler with a valid token.
func FuzzGetQuery(f *testing.F) {
	seeds := []string{
		"",
		"kind=timeout&host=h1.example&slave=s1&since=1h&until=2026-03-04T12:00:00Z&limit=10&offset=2",
		"limit=0", "limit=-1", "limit=1001", "limit=99999999999999999999", "limit=1e3", "limit=%00",
		"offset=-5", "offset=9223372036854775807", "offset=abc",
		"since=2026-03-04T12:00:00Z&until=2020-01-01T00:00:00Z", "since=-1h", "since=9999999h", "until=1e400h",
		"span=24h&step=1s", "span=25h", "span=1h&step=0", "span=-1h", "span=1ns&step=1ns", "step=2562047h",
		"span=9223372036854775807ns&step=1ns", "crawl=%7B%7D%3A*&kind=%0A%0D",
		"%zz", ";;;&&&===", "limit=1&limit=2000", "crawl=" + strings.Repeat("a", 5000),
	}
	for i, s := range seeds {
		f.Add(uint8(i), s)
	}
	f.Fuzz(func(t *testing.T, which uint8, raw string) {
		fb := newFake()
		s := newTestServer(t, fb, func(o *Options) {
			o.SD = nil
		})
		path := getEndpoints[int(which)%len(getEndpoints)]
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.URL.RawQuery = raw
		r.Header.Set("Authorization", "Bearer "+testToken)
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		resp := w.Result()
		body := checkAPIResponse(t, path+"?"+raw, resp)
		if resp.StatusCode != http.StatusOK {
			return
		}
		// Limits reach the backend bounded, whatever was asked.
		fb.mu.Lock()
		defer fb.mu.Unlock()
		for _, q := range fb.excQueries {
			if q.Limit < 1 || q.Limit > maxLimit || q.Offset < 0 {
				t.Fatalf("%s?%s reached the backend with limit %d offset %d", path, raw, q.Limit, q.Offset)
			}
			if !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since) {
				t.Fatalf("%s?%s reached the backend with until %v before since %v", path, raw, q.Until, q.Since)
			}
		}
		for _, c := range fb.lostCalls {
			if c.Limit < 1 || c.Limit > maxLimit || c.Offset < 0 {
				t.Fatalf("%s?%s reached the backend with limit %d offset %d", path, raw, c.Limit, c.Offset)
			}
		}
		for _, c := range fb.seriesCalls {
			if c.Span <= 0 || c.Span > maxSpan || c.Step < minStep || c.Step > c.Span ||
				(c.Span+c.Step-1)/c.Step > maxPoints {
				t.Fatalf("%s?%s reached the backend with span %s step %s", path, raw, c.Span, c.Step)
			}
		}
		switch path {
		case "/api/v1/exceptions":
			var page ExceptionPage
			if err := json.Unmarshal(body, &page); err != nil || page.Items == nil || len(page.Items) > maxLimit {
				t.Fatalf("%s?%s: page %q (%v)", path, raw, body, err)
			}
		case "/api/v1/series":
			var pts []Point
			if err := json.Unmarshal(body, &pts); err != nil || pts == nil || len(pts) > maxPoints {
				t.Fatalf("%s?%s: %d points (%v)", path, raw, len(pts), err)
			}
		}
	})
}

// FuzzAction posts arbitrary bytes as an action through the real handler
// with a valid token.
func FuzzAction(f *testing.F) {
	seeds := []string{
		`{"kind":"pause","crawl":"news"}`,
		`{"kind":"resume","crawl":"news"}`,
		`{"kind":"seed","crawl":"news","urls":["https://a.example/","http://b.example/x?y=1"]}`,
		`{"kind":"requeue","crawl":"news"}`,
		`{"kind":"drain","slave":"s1"}`,
		`{"kind":"retire_proxy","crawl":"news","proxy":"http://p1.example:8080"}`,
		`{"kind":"seed","crawl":"news","urls":["javascript:alert(1)"]}`,
		`{"kind":"seed","crawl":"news","urls":[""]}`,
		`{"kind":"seed","crawl":"news","urls":["//x"]}`,
		`{"kind":"seed","crawl":"news","urls":null}`,
		`{"kind":"pause","crawl":"news","evil":1}`,
		`{"kind":"PAUSE","crawl":"news"}`,
		`{"kind":"pause","crawl":"news"}{"kind":"resume"}`,
		`{"kind":"pause","crawl":"news"} x`,
		`{"kind":"pause","kind":"drain","slave":"s1"}`,
		`{"kind":"drain","slave":"   "}`,
		`{"kind":1}`, `[]`, `null`, `""`, ``, `{`, "\x00\xff", `{"kind":"seed","crawl":"news","urls":[1]}`,
		`{"kind":"seed","crawl":"news","urls":["http://[::1"]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fb := newFake()
		s := newTestServer(t, fb, nil)
		r := httptest.NewRequest(http.MethodPost, "/api/v1/actions", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+testToken)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		resp := w.Result()
		checkAPIResponse(t, "action "+string(body), resp)
		acts := fb.recorded()
		if resp.StatusCode != http.StatusOK {
			if len(acts) != 0 && resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("action %q: status %d after reaching the backend", body, resp.StatusCode)
			}
			return
		}
		// Only a well-formed action of a known kind reaches the backend.
		if len(acts) != 1 {
			t.Fatalf("action %q: 200 with %d backend calls", body, len(acts))
		}
		a := acts[0]
		kinds := []string{ActPause, ActResume, ActSeed, ActRequeue, ActDrain, ActRetireProxy}
		if !slices.Contains(kinds, a.Kind) {
			t.Fatalf("action %q: unknown kind %q reached the backend", body, a.Kind)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			t.Fatalf("action %q accepted but is not a JSON object: %v", body, err)
		}
		for k := range fields {
			if !slices.Contains([]string{"kind", "crawl", "slave", "proxy", "urls"}, strings.ToLower(k)) {
				t.Fatalf("action %q accepted with unknown field %q", body, k)
			}
		}
		if a.Kind == ActSeed {
			if len(a.URLs) == 0 {
				t.Fatalf("action %q: seed without URLs accepted", body)
			}
			canon, err := urlx.NewCanonicalizer(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, raw := range a.URLs {
				u, err := canon.Canonicalize(strings.TrimSpace(raw))
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					t.Fatalf("action %q: seed URL %q accepted (%v)", body, raw, err)
				}
			}
		}
	})
}

// TestActionBadInput: bodies too large, unknown kinds and fields, and seed
// URLs that are not http(s) are refused with 4xx before the backend.
func TestActionBadInput(t *testing.T) {
	big := `{"kind":"seed","crawl":"news","urls":["https://a.example/` + strings.Repeat("a", maxActionBody) + `"]}`
	many := `{"kind":"seed","crawl":"news","urls":[` + strings.TrimSuffix(strings.Repeat(`"http://a.example/",`, maxSeedURLs+1), ",") + `]}`
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantErr    string
	}{
		{"body over the limit", big, http.StatusRequestEntityTooLarge, "action body larger than 1048576 bytes"},
		{"too many urls", many, http.StatusBadRequest, "action seed: 10001 urls, at most 10000"},
		{"unknown kind", `{"kind":"delete_everything","crawl":"news"}`, http.StatusBadRequest, `unknown action kind "delete_everything"`},
		{"unknown field", `{"kind":"pause","crawl":"news","force":true}`, http.StatusBadRequest, `malformed action: json: unknown field "force"`},
		{"javascript url", `{"kind":"seed","crawl":"news","urls":["https://ok.example/","javascript:alert(1)"]}`, http.StatusBadRequest, `action seed: urls[1]: "javascript:alert(1)"`},
		{"data url", `{"kind":"seed","crawl":"news","urls":["data:text/html,<script>x</script>"]}`, http.StatusBadRequest, "action seed: urls[0]"},
		{"no host", `{"kind":"seed","crawl":"news","urls":["http://"]}`, http.StatusBadRequest, "action seed: urls[0]"},
		{"url too long", `{"kind":"seed","crawl":"news","urls":["http://a.example/` + strings.Repeat("a", urlx.MaxURLLength) + `"]}`, http.StatusBadRequest, "action seed: urls[0]: longer than"},
		{"hostile host", `{"kind":"seed","crawl":"news","urls":["http://a{b}.example/"]}`, http.StatusBadRequest, "action seed: urls[0]"},
		{"two values", `{"kind":"pause","crawl":"news"}{"kind":"resume","crawl":"news"}`, http.StatusBadRequest, "malformed action: more than one JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fb := newFake()
			s := newTestServer(t, fb, nil)
			resp := do(s, request{method: http.MethodPost, path: "/api/v1/actions", body: tt.body, headers: jsonBearer()})
			body := checkAPIResponse(t, tt.name, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
			}
			var eb errorBody
			if err := json.Unmarshal(body, &eb); err != nil || !strings.HasPrefix(eb.Error, tt.wantErr) {
				t.Errorf("error %q, want it to start with %q (%v)", eb.Error, tt.wantErr, err)
			}
			if acts := fb.recorded(); len(acts) != 0 {
				t.Errorf("the backend got %+v", acts)
			}
		})
	}
}
