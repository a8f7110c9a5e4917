package admin

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// testNow is the fake clock of the tests.
var testNow = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// seriesCall records the arguments of a Series call.
type seriesCall struct {
	Crawl      string
	Span, Step time.Duration
}

// lostCall records the arguments of a Lost call.
type lostCall struct {
	Crawl         string
	Limit, Offset int
}

// fakeBackend is an in-memory Backend that records what it is asked.
type fakeBackend struct {
	mu         sync.Mutex
	ov         Overview
	exceptions []events.Exception // newest first
	lost       []events.Lost
	proxies    map[string][]ProxyHealth
	err        error // returned by every read when set
	actErr     error // returned by Act when set

	actions     []Action
	seriesCalls []seriesCall
	excQueries  []ExceptionQuery
	lostCalls   []lostCall
}

// newFake returns a fake with one crawl "news", two slaves, exceptions of
// two kinds, a lost task and two proxies.
func newFake() *fakeBackend {
	f := &fakeBackend{
		ov: Overview{
			Now: testNow,
			Crawls: []CrawlView{{
				Stats: frontier.Stats{
					Crawl: "news", Queued: 1200, InFlight: 8, Retry: 3, Done: 4321,
					Failed: 2, Seen: 6000, Lost: 1, PagesPerSec: 12.5,
				},
				Schedules: []ScheduleView{{Name: "", Spec: "@daily", NextRun: testNow.Add(6 * time.Hour)}},
				Recrawl:   &RecrawlView{Run: 3, Started: testNow.Add(-time.Hour), Unchanged: 5400, Changed: 600, New: 12},
			}},
			Slaves: []SlaveView{
				{
					Heartbeat: events.Heartbeat{
						Crawl: "news", Slave: "s1", Host: "crawler-1", Pages: 2000, Errors: 4,
						InFlight: 5, RSS: 150 << 20, State: "running", Render: true, RulesVersion: "v7",
					},
					LastSeen: testNow.Add(-3 * time.Second), Alive: true,
				},
				{
					Heartbeat: events.Heartbeat{Crawl: "news", Slave: "s2", Host: "crawler-2", Pages: 10},
					LastSeen:  testNow.Add(-10 * time.Minute),
				},
			},
			Rules: RulesView{
				Dir: "rules", Version: "v7", RuleSets: 3, LoadedAt: testNow.Add(-time.Hour),
				LastError: "shop.yaml:12: unknown field \"selectr\"", LastErrorAt: testNow.Add(-time.Minute),
			},
		},
		proxies: map[string][]ProxyHealth{
			"news": {
				{Proxy: "http://p1.example:8080", State: events.ProxyUp, Slave: "s1", At: testNow.Add(-time.Minute)},
				{Proxy: "http://p2.example:8080", State: events.ProxyCooling, Slave: "s1", Reason: "ban: HTTP 403", Bans: 2, At: testNow},
			},
		},
		lost: []events.Lost{{Crawl: "news", URL: "https://a.example/x", Slave: "s2", Attempt: 1, Reason: events.LostSlaveDead,
			LeasedAt: testNow.Add(-time.Hour).UnixMilli(), DetectedAt: testNow.Add(-50 * time.Minute).UnixMilli()}},
	}
	kinds := []string{events.KindTimeout, events.KindDNS, events.KindTimeout, events.KindHTTPStatus, events.KindTimeout}
	for i, k := range kinds {
		f.exceptions = append(f.exceptions, events.Exception{
			Crawl: "news", Kind: k, URL: fmt.Sprintf("https://h%d.example/page?q=<b>", i),
			Host: fmt.Sprintf("h%d.example", i), Slave: "s1", Status: 500 + i,
			Message: fmt.Sprintf("failure %d <script>alert(1)</script>", i),
			At:      testNow.Add(-time.Duration(i) * time.Minute).UnixMilli(),
		})
	}
	return f
}

func (f *fakeBackend) Overview(context.Context) (Overview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Overview{}, f.err
	}
	ov := f.ov
	ov.Crawls = append([]CrawlView(nil), f.ov.Crawls...)
	ov.Slaves = append([]SlaveView(nil), f.ov.Slaves...)
	return ov, nil
}

func (f *fakeBackend) Series(_ context.Context, crawl string, span, step time.Duration) ([]Point, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seriesCalls = append(f.seriesCalls, seriesCall{Crawl: crawl, Span: span, Step: step})
	if f.err != nil {
		return nil, f.err
	}
	n := int(span / step)
	start := f.ov.Now.Add(-span)
	pts := make([]Point, n)
	for i := range pts {
		pts[i] = Point{At: start.Add(time.Duration(i) * step), PagesPerSec: float64(i % 20)}
	}
	return pts, nil
}

func (f *fakeBackend) Exceptions(_ context.Context, q ExceptionQuery) (ExceptionPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.excQueries = append(f.excQueries, q)
	if f.err != nil {
		return ExceptionPage{}, f.err
	}
	var match []events.Exception
	for _, e := range f.exceptions {
		at := time.UnixMilli(e.At)
		if (q.Crawl != "" && e.Crawl != q.Crawl) || (q.Kind != "" && e.Kind != q.Kind) ||
			(q.Host != "" && e.Host != q.Host) || (q.Slave != "" && e.Slave != q.Slave) ||
			(!q.Since.IsZero() && at.Before(q.Since)) || (!q.Until.IsZero() && at.After(q.Until)) {
			continue
		}
		match = append(match, e)
	}
	page := ExceptionPage{Total: len(match)}
	if q.Offset < len(match) {
		page.Items = match[q.Offset:min(len(match), q.Offset+q.Limit)]
	}
	return page, nil
}

func (f *fakeBackend) Lost(_ context.Context, crawl string, limit, offset int) ([]events.Lost, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lostCalls = append(f.lostCalls, lostCall{Crawl: crawl, Limit: limit, Offset: offset})
	if f.err != nil {
		return nil, f.err
	}
	if offset >= len(f.lost) {
		return nil, nil
	}
	return f.lost[offset:min(len(f.lost), offset+limit)], nil
}

func (f *fakeBackend) Proxies(_ context.Context, crawl string) ([]ProxyHealth, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return f.proxies[crawl], nil
}

func (f *fakeBackend) Act(_ context.Context, a Action) (ActionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = append(f.actions, a)
	if f.actErr != nil {
		return ActionResult{}, f.actErr
	}
	switch a.Kind {
	case ActPause, ActResume:
		for i := range f.ov.Crawls {
			if f.ov.Crawls[i].Crawl == a.Crawl {
				f.ov.Crawls[i].Paused = a.Kind == ActPause
				return ActionResult{OK: true, Message: a.Kind + "d " + a.Crawl}, nil
			}
		}
		return ActionResult{}, fmt.Errorf("%w: unknown crawl %q", ErrBadAction, a.Crawl)
	case ActSeed:
		return ActionResult{OK: true, Count: len(a.URLs), Message: fmt.Sprintf("%d seeds added", len(a.URLs))}, nil
	}
	return ActionResult{OK: true, Message: a.Kind + " done"}, nil
}

// setDone changes the crawl's done counter.
func (f *fakeBackend) setDone(crawl string, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.ov.Crawls {
		if f.ov.Crawls[i].Crawl == crawl {
			f.ov.Crawls[i].Done = n
		}
	}
}

// recorded returns a copy of the actions received.
func (f *fakeBackend) recorded() []Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Action(nil), f.actions...)
}
