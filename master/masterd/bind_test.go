package masterd

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/events"
)

func TestSourceOf(t *testing.T) {
	for _, tc := range []struct {
		streamID string
		want     source
	}{
		{"1700000000000-0", source{crawl: "news", written: 1700000000000}},
		{"~3/1700000000000-0", source{crawl: "news", written: 1700000000000}},
		{"pi1/1700000000000-0", source{crawl: "news", slave: "pi1", written: 1700000000000}},
		{"pi1~3/1700000000000-0", source{crawl: "news", slave: "pi1", written: 1700000000000}},
		{"host-12.a_b~12/1-2", source{crawl: "news", slave: "host-12.a_b", written: 1}},
		{"pi1/x-2", source{crawl: "news", slave: "pi1"}},
		{"pi1/-5-2", source{crawl: "news", slave: "pi1"}},
	} {
		if got := sourceOf("news", tc.streamID); got != tc.want {
			t.Errorf("sourceOf(%q) = %+v, want %+v", tc.streamID, got, tc.want)
		}
	}
}

// TestBind checks which records bind accepts from which stream, what it
// fills in, and what it says about a forgery.
func TestBind(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	ms := now.UnixMilli()
	slaveStream := source{crawl: "news", slave: "pi1"}
	writtenNow := source{crawl: "news", slave: "pi1", written: ms}
	ownStream := source{crawl: "news"}
	type want struct {
		Field, Slave, Msg string
	}
	for _, tc := range []struct {
		name  string
		src   source
		env   events.Envelope
		want  *want           // nil: accepted
		after events.Envelope // accepted: the envelope as bound
	}{
		{name: "honest page", src: slaveStream,
			env:   events.Envelope{Page: &events.Page{Crawl: "news", Slave: "pi1", FetchedAt: ms}},
			after: events.Envelope{Page: &events.Page{Crawl: "news", Slave: "pi1", FetchedAt: ms}}},
		{name: "empty crawl and slave are filled", src: slaveStream,
			env:   events.Envelope{Exception: &events.Exception{Kind: "dns", At: ms}},
			after: events.Envelope{Exception: &events.Exception{Crawl: "news", Slave: "pi1", Kind: "dns", At: ms}}},
		{name: "clock 5 minutes fast", src: slaveStream,
			env:   events.Envelope{Item: &events.Item{Crawl: "news", Slave: "pi1", FetchedAt: ms + 300_000}},
			after: events.Envelope{Item: &events.Item{Crawl: "news", Slave: "pi1", FetchedAt: ms + 300_000}}},
		{name: "clock 5 minutes and 1 ms fast", src: slaveStream,
			env:  events.Envelope{Item: &events.Item{Crawl: "news", Slave: "pi1", FetchedAt: ms + 300_001}},
			want: &want{"fetched_at", "pi1", "fetched_at 1800000300001 is 5m0s ahead of the master's clock (at most 5m0s)"}},
		{name: "clock 10 minutes fast: dated when its entry was written", src: writtenNow,
			env:   events.Envelope{Page: &events.Page{Crawl: "news", Slave: "pi1", FetchedAt: ms + 600_000}},
			after: events.Envelope{Page: &events.Page{Crawl: "news", Slave: "pi1", FetchedAt: ms}}},
		{name: "clock 10 minutes slow: its own time", src: writtenNow,
			env:   events.Envelope{Item: &events.Item{Crawl: "news", Slave: "pi1", FetchedAt: ms - 600_000}},
			after: events.Envelope{Item: &events.Item{Crawl: "news", Slave: "pi1", FetchedAt: ms - 600_000}}},
		{name: "an entry id a slave chose, an hour ahead", src: source{crawl: "news", slave: "pi1", written: ms + 3_600_000},
			env:  events.Envelope{Item: &events.Item{Crawl: "news", Slave: "pi1", FetchedAt: ms + 7_200_000}},
			want: &want{"fetched_at", "pi1", "fetched_at 1800003600000 is 1h0m0s ahead of the master's clock (at most 5m0s)"}},
		{name: "the master's stream keeps its times", src: source{crawl: "news", written: ms},
			env:   events.Envelope{Lost: &events.Lost{Crawl: "news", Slave: "o1", DetectedAt: ms + 600_000}},
			after: events.Envelope{Lost: &events.Lost{Crawl: "news", Slave: "o1", DetectedAt: ms + 600_000}}},
		{name: "another crawl", src: slaveStream,
			env:  events.Envelope{Item: &events.Item{Crawl: "other", Slave: "pi1", FetchedAt: ms}},
			want: &want{"crawl", "pi1", `crawl "other" is not the stream's "news"`}},
		{name: "another slave", src: slaveStream,
			env:  events.Envelope{Page: &events.Page{Crawl: "news", Slave: "o1", FetchedAt: ms}},
			want: &want{"slave", "pi1", `slave "o1" is not the stream's "pi1"`}},
		{name: "heartbeat of another slave", src: slaveStream,
			env:  events.Envelope{Heartbeat: &events.Heartbeat{Slave: "o1", At: ms}},
			want: &want{"slave", "pi1", `slave "o1" is not the stream's "pi1"`}},
		{name: "lost lease dated ahead", src: slaveStream,
			env:  events.Envelope{Lost: &events.Lost{Slave: "pi1", DetectedAt: ms + 2*86_400_000}},
			want: &want{"detected_at", "pi1", "detected_at 1800172800000 is 48h ahead of the master's clock (at most 5m0s)"}},
		{name: "proxy event dated ahead", src: slaveStream,
			env:  events.Envelope{Proxy: &events.Proxy{At: ms + 3_600_000}},
			want: &want{"at", "pi1", "at 1800003600000 is 1h0m0s ahead of the master's clock (at most 5m0s)"}},
		{name: "control characters and a long value are quoted and cut", src: slaveStream,
			env:  events.Envelope{Slave: &events.Slave{Crawl: "\x1b[31m" + strings.Repeat("é", 40), Slave: "pi1", At: ms}},
			want: &want{"crawl", "pi1", `crawl "\x1b[31m` + strings.Repeat("é", 29) + `"… (85 bytes) is not the stream's "news"`}},
		{name: "the master's stream names any slave", src: ownStream,
			env:   events.Envelope{Lost: &events.Lost{Crawl: "news", Slave: "o1", DetectedAt: ms + 86_400_000}},
			after: events.Envelope{Lost: &events.Lost{Crawl: "news", Slave: "o1", DetectedAt: ms + 86_400_000}}},
		{name: "the master's stream leaves the slave empty", src: ownStream,
			env:   events.Envelope{Exception: &events.Exception{Kind: "rules"}},
			after: events.Envelope{Exception: &events.Exception{Crawl: "news", Kind: "rules"}}},
		{name: "the master's stream, another crawl", src: ownStream,
			env:  events.Envelope{Duplicate: &events.Duplicate{Crawl: "other", Slave: "o1"}},
			want: &want{"crawl", "o1", `crawl "other" is not the stream's "news"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			orig := cloneEnvelope(tc.env)
			fg := bind(&env, tc.src, now)
			if tc.want == nil {
				if fg != nil {
					t.Fatalf("refused: %+v", *fg)
				}
				if d := cmp.Diff(tc.after, env); d != "" {
					t.Errorf("bound envelope (-want +got):\n%s", d)
				}
				return
			}
			if fg == nil {
				t.Fatalf("accepted %+v", env)
			}
			if d := cmp.Diff(*tc.want, want{fg.field, fg.slave, fg.msg}); d != "" {
				t.Errorf("forgery (-want +got):\n%s", d)
			}
			if d := cmp.Diff(orig, env); d != "" {
				t.Errorf("a refused envelope changed (-before +after):\n%s", d)
			}
		})
	}
}

// cloneEnvelope copies env's records, so a test can tell whether bind
// changed them.
func cloneEnvelope(env events.Envelope) events.Envelope {
	c := env
	c.Page, c.Exception, c.Slave, c.Heartbeat = clone(env.Page), clone(env.Exception), clone(env.Slave), clone(env.Heartbeat)
	c.Lost, c.Proxy, c.Duplicate, c.Item = clone(env.Lost), clone(env.Proxy), clone(env.Duplicate), clone(env.Item)
	return c
}

func clone[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// FuzzBind decodes any event body from any stream: a record bind accepts
// names the stream's crawl (and, from a slave's stream, its slave and a
// time not ahead); one it refuses is unchanged, and its forged_event
// exception is for the stream's crawl, with a short valid message.
func FuzzBind(f *testing.F) {
	for _, s := range []struct {
		typ, data, streamID string
	}{
		{"item", `{"crawl":"other","slave":"o1","fetched_at":4102444800000}`, "pi1/1700000000000-0"},
		{"page", `{"crawl":"news","slave":"pi1","fetched_at":1800000000000}`, "pi1~2/1700000000000-3"},
		{"heartbeat", `{"crawl":"news","slave":"o1"}`, "pi1/1-0"},
		{"exception", `{"kind":"dns"}`, "pi1/1-0"},
		{"lost", `{"crawl":"news","slave":"o1","detected_at":9223372036854775807}`, "1-0"},
		{"slave", `{"crawl":"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"}`, "~1/1-0"},
	} {
		f.Add(s.typ, s.data, s.streamID)
	}
	now := time.UnixMilli(1_800_000_000_000)
	f.Fuzz(func(t *testing.T, typ, data, streamID string) {
		env, err := events.Decode("pi1/1-0", events.Type(typ), []byte(data))
		if err != nil {
			return
		}
		src := sourceOf("news", streamID)
		orig := cloneEnvelope(env)
		fg := bind(&env, src, now)
		if fg != nil {
			if d := cmp.Diff(orig, env); d != "" {
				t.Fatalf("a refused envelope changed:\n%s", d)
			}
			x := forgedException(env, src, fg, now).Exception
			if x.Crawl != "news" || x.Kind != events.KindForgedEvent || (src.slave != "" && x.Slave != src.slave) {
				t.Fatalf("forged_event exception %+v from %+v", x, src)
			}
			if !utf8.ValidString(x.Message) || len(x.Message) > 400 {
				t.Fatalf("message %d bytes, valid UTF-8 %v: %q", len(x.Message), utf8.ValidString(x.Message), x.Message)
			}
			return
		}
		for _, b := range boundFields(&env) {
			if *b.crawl != "news" {
				t.Fatalf("accepted crawl %q", *b.crawl)
			}
			if src.slave != "" && (*b.slave != src.slave || *b.at > now.Add(maxAhead).UnixMilli()) {
				t.Fatalf("accepted slave %q, %s %d from %+v", *b.slave, b.atName, *b.at, src)
			}
		}
	})
}
