package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/events"
)

func TestPageStats(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	b, _ := mixed("c1")
	// one more failure, a 5xx page, a 301 and exceptions that are no
	// failed fetch, so the classes and the host order are all exercised
	const t0 = 1_700_000_000_123
	b = append(b,
		events.Envelope{ID: "1700000000200-1", Type: events.TypePage, Page: &events.Page{Crawl: "c1", URL: "http://b.test/5",
			Status: 503, Bytes: 10, FetchedAt: t0 + 20}},
		events.Envelope{ID: "1700000000200-2", Type: events.TypePage, Page: &events.Page{Crawl: "c1", URL: "http://b.test/3",
			Status: 301, FetchedAt: t0 + 1}},
		events.Envelope{ID: "1700000000200-3", Type: events.TypeException, Exception: &events.Exception{Crawl: "c1",
			Kind: events.KindTimeout, URL: "http://b.test/slow", Host: "b.test", At: t0 + 21}},
		events.Envelope{ID: "1700000000200-4", Type: events.TypeException, Exception: &events.Exception{Crawl: "c1",
			Kind: events.KindExtract, URL: "http://c.test/", Host: "c.test", At: t0 + 22}},
		events.Envelope{ID: "1700000000200-5", Type: events.TypeException, Exception: &events.Exception{Crawl: "c1",
			Kind: events.KindExtract, URL: "http://c.test/2", Host: "c.test", At: t0 + 23}},
		events.Envelope{ID: "1700000000200-6", Type: events.TypeException, Exception: &events.Exception{Crawl: "c1",
			Kind: events.KindExtract, URL: "http://c.test/3", Host: "c.test", At: t0 + 24}},
		events.Envelope{ID: "1700000000200-7", Type: events.TypeException, Exception: &events.Exception{Crawl: "c1",
			Kind: events.KindRobotsDenied, URL: "http://c.test/private", Host: "c.test", At: t0 + 25}},
	)
	if err := s.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		crawl string
		top   int
		want  PageStats
	}{
		{"mixed", "c1", 5, PageStats{
			Pages: map[string]int64{"2xx": 5, "3xx": 1, "4xx": 1, "5xx": 1}, Bytes: 5130, Items: 3,
			Exceptions: map[string]int64{events.KindDNS: 1, events.KindHTTPStatus: 1, events.KindRenderTimeout: 1,
				events.KindTimeout: 1, events.KindExtract: 3, events.KindRobotsDenied: 1},
			FailingHosts: []HostCount{{"a.test", 2}, {"b.test", 2}},
			First:        time.UnixMilli(t0).UTC(), Last: time.UnixMilli(t0 + 20).UTC(),
		}},
		{"top one", "c1", 1, PageStats{
			Pages: map[string]int64{"2xx": 5, "3xx": 1, "4xx": 1, "5xx": 1}, Bytes: 5130, Items: 3,
			Exceptions: map[string]int64{events.KindDNS: 1, events.KindHTTPStatus: 1, events.KindRenderTimeout: 1,
				events.KindTimeout: 1, events.KindExtract: 3, events.KindRobotsDenied: 1},
			FailingHosts: []HostCount{{"a.test", 2}},
			First:        time.UnixMilli(t0).UTC(), Last: time.UnixMilli(t0 + 20).UTC(),
		}},
		{"no rows", "nosuch", 5, PageStats{Pages: map[string]int64{}, Exceptions: map[string]int64{}}},
	} {
		got, err := s.PageStats(ctx, tc.crawl, tc.top)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, d)
		}
	}
}
