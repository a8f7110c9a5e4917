package masterd

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/events"
)

// TestExport writes the same items in every format, with the envelope and
// as flat rows of chosen fields.
func TestExport(t *testing.T) {
	cfg := seedsConfig(t, 1)
	st, err := OpenStore(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli()
	crawl := cfg.Crawl.Name
	if err := st.Insert(t.Context(), []events.Envelope{
		{ID: "1-1", Item: &events.Item{Crawl: crawl, Rule: "docs", Item: "page", URL: "http://a.test/1",
			Data: json.RawMessage(`{"title": "One, \"quoted\"", "words": 12}`), FetchedAt: at}},
		{ID: "1-2", Item: &events.Item{Crawl: crawl, Rule: "docs", Item: "page", URL: "http://a.test/2",
			Data: json.RawMessage(`{"title": "Two", "tags": ["x", "y"]}`), FetchedAt: at}},
	}); err != nil {
		t.Fatal(err)
	}
	env := func(u, data string) string {
		return `{"crawl":"` + crawl + `","rule":"docs","item":"page","url":"` + u + `","fetched_at":"2026-01-02T03:04:05Z","data":` + data + `}`
	}
	for _, tc := range []struct {
		name   string
		format string
		fields []string
		want   string
	}{
		{"jsonl", "jsonl", nil, env("http://a.test/1", `{"title":"One, \"quoted\"","words":12}`) + "\n" +
			env("http://a.test/2", `{"title":"Two","tags":["x","y"]}`) + "\n"},
		{"json", "json", nil, "[\n" + env("http://a.test/1", `{"title":"One, \"quoted\"","words":12}`) + ",\n" +
			env("http://a.test/2", `{"title":"Two","tags":["x","y"]}`) + "\n]\n"},
		{"csv", "csv", nil, "crawl,rule,item,url,fetched_at,tags,title,words\n" +
			crawl + `,docs,page,http://a.test/1,2026-01-02T03:04:05Z,,"One, ""quoted""",12` + "\n" +
			crawl + `,docs,page,http://a.test/2,2026-01-02T03:04:05Z,"[""x"", ""y""]",Two,` + "\n"},
		{"jsonl fields", "jsonl", []string{"url", "title", "words"},
			`{"url":"http://a.test/1","title":"One, \"quoted\"","words":12}` + "\n" +
				`{"url":"http://a.test/2","title":"Two","words":null}` + "\n"},
		{"json fields", "json", []string{"title"}, "[\n" + `{"title":"One, \"quoted\""}` + ",\n" + `{"title":"Two"}` + "\n]\n"},
		{"csv fields", "csv", []string{"title", "url"}, "title,url\n" + `"One, ""quoted""",http://a.test/1` + "\n" +
			"Two,http://a.test/2\n"},
	} {
		var b bytes.Buffer
		n, err := Export(t.Context(), cfg, ExportOptions{Crawl: crawl, Format: tc.format, Fields: tc.fields}, &b)
		if err != nil || n != 2 {
			t.Errorf("%s: %d items, %v", tc.name, n, err)
		}
		if d := cmp.Diff(tc.want, b.String()); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
		if tc.format == "json" {
			var v []map[string]any
			if err := json.Unmarshal(b.Bytes(), &v); err != nil || len(v) != 2 {
				t.Errorf("%s: not a JSON array of 2: %v", tc.name, err)
			}
		}
	}
	var b bytes.Buffer
	if n, err := Export(t.Context(), cfg, ExportOptions{Crawl: "nothing-here", Format: "json"}, &b); err != nil || n != 0 || b.String() != "[\n]\n" {
		t.Errorf("empty json export: %d, %v, %q", n, err, b.String())
	}
}

func TestFormatOfPath(t *testing.T) {
	for p, want := range map[string]string{"items.jsonl": "jsonl", "a/b.NDJSON": "jsonl", "x.json": "json",
		"x.csv": "csv", "x.txt": "", "x": ""} {
		if got := FormatOfPath(p); got != want {
			t.Errorf("FormatOfPath(%q) = %q, want %q", p, got, want)
		}
	}
}
