package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/events"
)

func TestAdminReads(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ms := func(sec int) int64 { return t0.Add(time.Duration(sec) * time.Second).UnixMilli() }
	var b []events.Envelope
	id := 0
	add := func(e events.Envelope) {
		id++
		e.ID = fmt.Sprintf("7-%d", id)
		b = append(b, e)
	}
	// pages at 0, 1, 9, 10, 25 s (and one in another crawl)
	for _, sec := range []int{0, 1, 9, 10, 25} {
		add(events.Envelope{Page: &events.Page{Crawl: "a", URL: fmt.Sprintf("http://x.test/%d", sec), FetchedAt: ms(sec)}})
	}
	add(events.Envelope{Page: &events.Page{Crawl: "b", URL: "http://x.test/b", FetchedAt: ms(1)}})
	for i, e := range []struct {
		proxy, state string
		sec          int
	}{
		{"http://p1.test:1", events.ProxyAdded, 0},
		{"http://p1.test:1", events.ProxyCooling, 5},
		{"http://p2.test:2", events.ProxyAdded, 6},
		{"http://p1.test:1", events.ProxyUp, 8},
		{"http://p2.test:2", events.ProxyRetired, 9},
	} {
		add(events.Envelope{Proxy: &events.Proxy{Crawl: "a", Slave: fmt.Sprintf("s%d", i), Proxy: e.proxy, State: e.state, At: ms(e.sec)}})
	}
	for _, sec := range []int{3, 7, 5} {
		add(events.Envelope{Lost: &events.Lost{Crawl: "a", URL: fmt.Sprintf("http://x.test/lost%d", sec), LeasedAt: ms(0), DetectedAt: ms(sec)}})
	}
	for i, k := range []string{events.KindDNS, events.KindTimeout, events.KindDNS} {
		add(events.Envelope{Exception: &events.Exception{Crawl: "a", Kind: k, Message: fmt.Sprint("x", i), At: ms(100 + i)}})
	}
	if err := s.Insert(ctx, b); err != nil {
		t.Fatal(err)
	}

	counts, err := s.PageCounts(ctx, "a", t0, 10*time.Second, 4)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]int64{3, 1, 1, 0}, counts); d != "" {
		t.Errorf("page counts (-want +got):\n%s", d)
	}
	if _, err := s.PageCounts(ctx, "a", t0, time.Millisecond, 4); err == nil {
		t.Error("sub-second step accepted")
	}

	ps, err := s.ProxyStates(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	type pv struct {
		Proxy, State, Slave string
		Bans                int
	}
	var got []pv
	for _, p := range ps {
		got = append(got, pv{p.Proxy.Proxy, p.State, p.Slave, p.Bans})
	}
	want := []pv{{"http://p1.test:1", events.ProxyUp, "s3", 1}, {"http://p2.test:2", events.ProxyRetired, "s4", 1}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("proxy states (-want +got):\n%s", d)
	}

	lost, err := s.LostTasksPage(ctx, "a", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, l := range lost {
		urls = append(urls, l.URL)
	}
	if d := cmp.Diff([]string{"http://x.test/lost7", "http://x.test/lost5"}, urls); d != "" {
		t.Errorf("lost page (-want +got):\n%s", d)
	}

	n, err := s.CountExceptions(ctx, ExceptionFilter{Crawl: "a", Kind: events.KindDNS})
	if err != nil || n != 2 {
		t.Errorf("count dns = %d, %v; want 2", n, err)
	}
	xs, err := s.Exceptions(ctx, ExceptionFilter{Crawl: "a", NewestFirst: true, Limit: 1})
	if err != nil || len(xs) != 1 || xs[0].Message != "x2" {
		t.Errorf("newest exception = %+v, %v", xs, err)
	}
}
