package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/events"
)

const testToken = "t0ken-for-tests-0123456789"

// newTestServer returns a server over f with the test token and clock,
// its sessions in the test Redis.
func newTestServer(t testing.TB, f *fakeBackend, mod func(*Options)) *Server {
	opt := Options{Backend: f, Token: testToken, Sessions: testSessions(t)}
	if mod != nil {
		mod(&opt)
	}
	s := New(opt)
	s.now = func() time.Time { return testNow }
	return s
}

// request is one request to a server under test.
type request struct {
	method  string
	path    string
	body    string
	headers map[string]string
	cookie  *http.Cookie
	remote  string // the client's address (host:port); "" = httptest's 192.0.2.1:1234
}

// do runs req against s and returns the response.
func do(s *Server, req request) *http.Response {
	method := req.method
	if method == "" {
		method = http.MethodGet
	}
	r := httptest.NewRequest(method, req.path, strings.NewReader(req.body))
	for k, v := range req.headers {
		r.Header.Set(k, v)
	}
	if req.cookie != nil {
		r.AddCookie(req.cookie)
	}
	if req.remote != "" {
		r.RemoteAddr = req.remote
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w.Result()
}

func bearer(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

func jsonBearer() map[string]string {
	return map[string]string{"Authorization": "Bearer " + testToken, "Content-Type": "application/json"}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return string(b)
}

// decodeJSON decodes s into a generic value for cmp.
func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode JSON %q: %v", s, err)
	}
	return v
}

func TestAPI(t *testing.T) {
	exc := newFake().exceptions
	excJSON := func(page ExceptionPage) string {
		b, err := json.Marshal(page)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name       string
		req        request
		mod        func(*fakeBackend, *Options)
		wantStatus int
		wantJSON   string // whole body, compared as JSON; "" = not checked
		wantErr    string // prefix of the "error" field; "" = not checked
		check      func(t *testing.T, f *fakeBackend, body string)
	}{
		{
			name:       "overview",
			req:        request{path: "/api/v1/overview"},
			wantStatus: http.StatusOK,
			check: func(t *testing.T, f *fakeBackend, body string) {
				var got Overview
				if err := json.Unmarshal([]byte(body), &got); err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(normalizeOverview(f.ov), got); d != "" {
					t.Errorf("overview (-want +got):\n%s", d)
				}
			},
		},
		{
			name:       "overview of nothing has empty lists",
			req:        request{path: "/api/v1/overview"},
			mod:        func(f *fakeBackend, _ *Options) { f.ov = Overview{Now: testNow} },
			wantStatus: http.StatusOK,
			wantJSON: `{"now":"2026-03-04T12:00:00Z","crawls":[],"slaves":[],
				"rules":{"dir":"","version":"","rule_sets":0}}`,
		},
		{
			name:       "overview backend failure",
			req:        request{path: "/api/v1/overview"},
			mod:        func(f *fakeBackend, _ *Options) { f.err = errors.New("redis: connection refused") },
			wantStatus: http.StatusInternalServerError,
			wantJSON:   `{"error":"internal error (see the master's log)"}`,
		},
		{
			name:       "series defaults",
			req:        request{path: "/api/v1/series?crawl=news"},
			wantStatus: http.StatusOK,
			check: func(t *testing.T, f *fakeBackend, body string) {
				want := []seriesCall{{Crawl: "news", Span: time.Hour, Step: 10 * time.Second}}
				if d := cmp.Diff(want, f.seriesCalls); d != "" {
					t.Errorf("series calls (-want +got):\n%s", d)
				}
				var pts []Point
				if err := json.Unmarshal([]byte(body), &pts); err != nil {
					t.Fatal(err)
				}
				if len(pts) != 360 {
					t.Errorf("got %d points, want 360", len(pts))
				}
			},
		},
		{
			name:       "series of a day by the minute",
			req:        request{path: "/api/v1/series?crawl=news&span=24h&step=1m"},
			wantStatus: http.StatusOK,
			check: func(t *testing.T, f *fakeBackend, _ string) {
				want := []seriesCall{{Crawl: "news", Span: 24 * time.Hour, Step: time.Minute}}
				if d := cmp.Diff(want, f.seriesCalls); d != "" {
					t.Errorf("series calls (-want +got):\n%s", d)
				}
			},
		},
		{name: "series span over a day", req: request{path: "/api/v1/series?span=25h&step=1m"}, wantStatus: http.StatusBadRequest, wantErr: "span:"},
		{name: "series span not a duration", req: request{path: "/api/v1/series?span=hour"}, wantStatus: http.StatusBadRequest, wantErr: "span:"},
		{name: "series negative span", req: request{path: "/api/v1/series?span=-1h"}, wantStatus: http.StatusBadRequest, wantErr: "span:"},
		{name: "series step under a second", req: request{path: "/api/v1/series?step=500ms"}, wantStatus: http.StatusBadRequest, wantErr: "step:"},
		{name: "series step not a duration", req: request{path: "/api/v1/series?step=10"}, wantStatus: http.StatusBadRequest, wantErr: "step:"},
		{name: "series step over span", req: request{path: "/api/v1/series?span=1m&step=2m"}, wantStatus: http.StatusBadRequest, wantErr: "step:"},
		{name: "series too many points", req: request{path: "/api/v1/series?span=24h&step=10s"}, wantStatus: http.StatusBadRequest, wantErr: "step: span/step gives 8640 points"},
		{name: "series 2000 points is fine", req: request{path: "/api/v1/series?span=2000s&step=1s"}, wantStatus: http.StatusOK},
		{
			name:       "exceptions defaults",
			req:        request{path: "/api/v1/exceptions"},
			wantStatus: http.StatusOK,
			wantJSON:   excJSON(ExceptionPage{Total: 5, Items: exc}),
			check: func(t *testing.T, f *fakeBackend, _ string) {
				want := []ExceptionQuery{{Limit: 50}}
				if d := cmp.Diff(want, f.excQueries); d != "" {
					t.Errorf("queries (-want +got):\n%s", d)
				}
			},
		},
		{
			name:       "exceptions filtered and paged",
			req:        request{path: "/api/v1/exceptions?crawl=news&kind=timeout&host=h2.example&slave=s1&limit=1&offset=0"},
			wantStatus: http.StatusOK,
			wantJSON:   excJSON(ExceptionPage{Total: 1, Items: exc[2:3]}),
			check: func(t *testing.T, f *fakeBackend, _ string) {
				want := []ExceptionQuery{{Crawl: "news", Kind: "timeout", Host: "h2.example", Slave: "s1", Limit: 1}}
				if d := cmp.Diff(want, f.excQueries); d != "" {
					t.Errorf("queries (-want +got):\n%s", d)
				}
			},
		},
		{
			name:       "exceptions second page",
			req:        request{path: "/api/v1/exceptions?kind=timeout&limit=2&offset=2"},
			wantStatus: http.StatusOK,
			wantJSON:   excJSON(ExceptionPage{Total: 3, Items: exc[4:5]}),
			check: func(t *testing.T, f *fakeBackend, _ string) {
				want := []ExceptionQuery{{Kind: "timeout", Limit: 2, Offset: 2}}
				if d := cmp.Diff(want, f.excQueries); d != "" {
					t.Errorf("queries (-want +got):\n%s", d)
				}
			},
		},
		{
			name:       "exceptions since a duration ago",
			req:        request{path: "/api/v1/exceptions?since=1h&until=90s"},
			wantStatus: http.StatusOK,
			check: func(t *testing.T, f *fakeBackend, _ string) {
				want := []ExceptionQuery{{Since: testNow.Add(-time.Hour), Until: testNow.Add(-90 * time.Second), Limit: 50}}
				if d := cmp.Diff(want, f.excQueries); d != "" {
					t.Errorf("queries (-want +got):\n%s", d)
				}
			},
		},
		{
			name:       "exceptions since and until in RFC 3339",
			req:        request{path: "/api/v1/exceptions?since=2026-03-04T11:57:30Z&until=2026-03-04T13:00:00%2B01:00&limit=1000"},
			wantStatus: http.StatusOK,
			wantJSON:   excJSON(ExceptionPage{Total: 3, Items: exc[0:3]}),
			check: func(t *testing.T, f *fakeBackend, _ string) {
				want := []ExceptionQuery{{
					Since: time.Date(2026, 3, 4, 11, 57, 30, 0, time.UTC),
					Until: time.Date(2026, 3, 4, 13, 0, 0, 0, time.FixedZone("", 3600)),
					Limit: 1000,
				}}
				if d := cmp.Diff(want, f.excQueries); d != "" {
					t.Errorf("queries (-want +got):\n%s", d)
				}
			},
		},
		{name: "exceptions bad since", req: request{path: "/api/v1/exceptions?since=yesterday"}, wantStatus: http.StatusBadRequest, wantErr: "since:"},
		{name: "exceptions negative since", req: request{path: "/api/v1/exceptions?since=-1h"}, wantStatus: http.StatusBadRequest, wantErr: "since:"},
		{name: "exceptions bad until", req: request{path: "/api/v1/exceptions?until=2026-13-01"}, wantStatus: http.StatusBadRequest, wantErr: "until:"},
		{name: "exceptions until before since", req: request{path: "/api/v1/exceptions?since=1h&until=2h"}, wantStatus: http.StatusBadRequest, wantErr: "until: is before since"},
		{name: "exceptions limit 0", req: request{path: "/api/v1/exceptions?limit=0"}, wantStatus: http.StatusBadRequest, wantErr: "limit:"},
		{name: "exceptions limit over 1000", req: request{path: "/api/v1/exceptions?limit=1001"}, wantStatus: http.StatusBadRequest, wantErr: "limit:"},
		{name: "exceptions limit not a number", req: request{path: "/api/v1/exceptions?limit=ten"}, wantStatus: http.StatusBadRequest, wantErr: "limit:"},
		{name: "exceptions negative offset", req: request{path: "/api/v1/exceptions?offset=-1"}, wantStatus: http.StatusBadRequest, wantErr: "offset:"},
		{
			name:       "exceptions empty page is a list",
			req:        request{path: "/api/v1/exceptions?kind=nothing"},
			wantStatus: http.StatusOK,
			wantJSON:   `{"total":0,"items":[]}`,
		},
		{
			name:       "lost defaults",
			req:        request{path: "/api/v1/lost"},
			wantStatus: http.StatusOK,
			check: func(t *testing.T, f *fakeBackend, body string) {
				if d := cmp.Diff([]lostCall{{Limit: 50}}, f.lostCalls); d != "" {
					t.Errorf("lost calls (-want +got):\n%s", d)
				}
				var got []events.Lost
				if err := json.Unmarshal([]byte(body), &got); err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(f.lost, got); d != "" {
					t.Errorf("lost (-want +got):\n%s", d)
				}
			},
		},
		{
			name:       "lost paged",
			req:        request{path: "/api/v1/lost?crawl=news&limit=10&offset=30"},
			wantStatus: http.StatusOK,
			wantJSON:   `[]`,
			check: func(t *testing.T, f *fakeBackend, _ string) {
				if d := cmp.Diff([]lostCall{{Crawl: "news", Limit: 10, Offset: 30}}, f.lostCalls); d != "" {
					t.Errorf("lost calls (-want +got):\n%s", d)
				}
			},
		},
		{name: "lost limit too big", req: request{path: "/api/v1/lost?limit=5000"}, wantStatus: http.StatusBadRequest, wantErr: "limit:"},
		{
			name:       "proxies",
			req:        request{path: "/api/v1/proxies?crawl=news"},
			wantStatus: http.StatusOK,
			wantJSON: `[{"proxy":"http://p1.example:8080","state":"up","slave":"s1","at":"2026-03-04T11:59:00Z","bans":0},
				{"proxy":"http://p2.example:8080","state":"cooling","slave":"s1","reason":"ban: HTTP 403","at":"2026-03-04T12:00:00Z","bans":2}]`,
		},
		{name: "proxies of an unknown crawl", req: request{path: "/api/v1/proxies?crawl=other"}, wantStatus: http.StatusOK, wantJSON: `[]`},
		{name: "sd not enabled", req: request{path: "/api/v1/sd"}, wantStatus: http.StatusNotFound, wantErr: "service discovery is not enabled"},
		{
			name: "sd",
			req:  request{path: "/api/v1/sd"},
			mod: func(_ *fakeBackend, o *Options) {
				o.SD = func(context.Context) ([]SDTarget, error) {
					return []SDTarget{{Targets: []string{"10.0.0.5:9100"}, Labels: map[string]string{"slave": "s1", "crawl": "news"}}}, nil
				}
			},
			wantStatus: http.StatusOK,
			wantJSON:   `[{"targets":["10.0.0.5:9100"],"labels":{"crawl":"news","slave":"s1"}}]`,
		},
		{
			name: "sd failure",
			req:  request{path: "/api/v1/sd"},
			mod: func(_ *fakeBackend, o *Options) {
				o.SD = func(context.Context) ([]SDTarget, error) { return nil, errors.New("boom") }
			},
			wantStatus: http.StatusInternalServerError,
			wantErr:    "internal error",
		},
		{
			name:       "action pause",
			req:        request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"pause","crawl":"news"}`},
			wantStatus: http.StatusOK,
			wantJSON:   `{"ok":true,"count":0,"message":"paused news"}`,
			check: func(t *testing.T, f *fakeBackend, _ string) {
				if d := cmp.Diff([]Action{{Kind: ActPause, Crawl: "news"}}, f.recorded()); d != "" {
					t.Errorf("actions (-want +got):\n%s", d)
				}
			},
		},
		{
			name:       "action seed",
			req:        request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"seed","crawl":"news","urls":["https://a.example/","https://b.example/"]}`},
			wantStatus: http.StatusOK,
			wantJSON:   `{"ok":true,"count":2,"message":"2 seeds added"}`,
		},
		{
			name:       "action drain",
			req:        request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"drain","slave":"s1"}`},
			wantStatus: http.StatusOK,
			check: func(t *testing.T, f *fakeBackend, _ string) {
				if d := cmp.Diff([]Action{{Kind: ActDrain, Slave: "s1"}}, f.recorded()); d != "" {
					t.Errorf("actions (-want +got):\n%s", d)
				}
			},
		},
		{
			name:       "action retire proxy",
			req:        request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"retire_proxy","crawl":"news","proxy":"http://p2.example:8080"}`},
			wantStatus: http.StatusOK,
		},
		{name: "action malformed JSON", req: request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":`}, wantStatus: http.StatusBadRequest, wantErr: "malformed action"},
		{name: "action unknown field", req: request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"pause","crawl":"news","force":true}`}, wantStatus: http.StatusBadRequest, wantErr: "malformed action"},
		{name: "action two values", req: request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"pause","crawl":"news"} {}`}, wantStatus: http.StatusBadRequest, wantErr: "malformed action"},
		{name: "action unknown kind", req: request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"explode"}`}, wantStatus: http.StatusBadRequest, wantErr: `unknown action kind "explode"`},
		{name: "action without crawl", req: request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"pause"}`}, wantStatus: http.StatusBadRequest, wantErr: "action pause needs crawl"},
		{name: "seed without urls", req: request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"seed","crawl":"news"}`}, wantStatus: http.StatusBadRequest, wantErr: "action seed needs urls"},
		{name: "drain without slave", req: request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"drain"}`}, wantStatus: http.StatusBadRequest, wantErr: "action drain needs slave"},
		{
			name:       "action refused by the backend",
			req:        request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"pause","crawl":"nope"}`},
			wantStatus: http.StatusBadRequest,
			wantJSON:   `{"error":"bad action: unknown crawl \"nope\""}`,
		},
		{
			name:       "action failing in the backend",
			req:        request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"requeue","crawl":"news"}`},
			mod:        func(f *fakeBackend, _ *Options) { f.actErr = errors.New("redis: timeout") },
			wantStatus: http.StatusInternalServerError,
			wantJSON:   `{"error":"internal error (see the master's log)"}`,
		},
		{
			name: "action error wrapping ErrBadAction deeper",
			req:  request{method: http.MethodPost, path: "/api/v1/actions", body: `{"kind":"drain","slave":"s9"}`},
			mod: func(f *fakeBackend, _ *Options) {
				f.actErr = fmt.Errorf("drain: %w", fmt.Errorf("%w: unknown slave s9", ErrBadAction))
			},
			wantStatus: http.StatusBadRequest,
			wantErr:    "drain: bad action: unknown slave s9",
		},
		{name: "actions need POST", req: request{path: "/api/v1/actions"}, wantStatus: http.StatusMethodNotAllowed, wantErr: "method not allowed"},
		{name: "reads need GET", req: request{method: http.MethodPost, path: "/api/v1/overview"}, wantStatus: http.StatusMethodNotAllowed, wantErr: "method not allowed"},
		{name: "unknown endpoint", req: request{path: "/api/v1/nope"}, wantStatus: http.StatusNotFound, wantErr: "no such API endpoint"},
		{name: "metrics not enabled", req: request{path: "/metrics"}, wantStatus: http.StatusNotFound, wantErr: "metrics are not enabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			var mod func(*Options)
			if tt.mod != nil {
				mod = func(o *Options) { tt.mod(f, o) }
			}
			s := newTestServer(t, f, mod)
			req := tt.req
			req.headers = jsonBearer()
			resp := do(s, req)
			body := readBody(t, resp)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.wantStatus, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
				t.Errorf("Content-Type %q, want JSON", ct)
			}
			if tt.wantJSON != "" {
				if d := cmp.Diff(decodeJSON(t, tt.wantJSON), decodeJSON(t, body)); d != "" {
					t.Errorf("body (-want +got):\n%s", d)
				}
			}
			if tt.wantErr != "" {
				var e errorBody
				if err := json.Unmarshal([]byte(body), &e); err != nil {
					t.Fatalf("error body %q: %v", body, err)
				}
				if !strings.HasPrefix(e.Error, tt.wantErr) {
					t.Errorf("error %q, want it to start with %q", e.Error, tt.wantErr)
				}
			}
			if tt.check != nil {
				tt.check(t, f, body)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "redcrawl_pages_total 42\n")
	})
	s := newTestServer(t, newFake(), func(o *Options) { o.Metrics = metrics })
	resp := do(s, request{path: "/metrics", headers: bearer(testToken)})
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK || body != "redcrawl_pages_total 42\n" {
		t.Errorf("got %d %q, want 200 and the metrics", resp.StatusCode, body)
	}
}

func TestSeriesParams(t *testing.T) {
	tests := []struct {
		query      string
		span, step time.Duration
		wantErr    string
	}{
		{query: "", span: time.Hour, step: 10 * time.Second},
		{query: "span=1h&step=30s", span: time.Hour, step: 30 * time.Second},
		{query: "span=24h&step=44s", span: 24 * time.Hour, step: 44 * time.Second},
		{query: "span=24h&step=43s", wantErr: "step: span/step gives 2010 points, at most 2000 allowed"},
		{query: "span=0s", wantErr: "span: must be more than 0 and at most 24h0m0s"},
		{query: "step=0s", wantErr: "step: must be at least 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			span, step, err := seriesParams(q)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if span != tt.span || step != tt.step {
				t.Errorf("got %s/%s, want %s/%s", span, step, tt.span, tt.step)
			}
		})
	}
}
