package masterd

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	if n, err := Export(t.Context(), cfg, ExportOptions{Crawl: crawl, Rule: "no-such-rule", Format: "json"}, &b); err != nil || n != 0 || b.String() != "[\n]\n" {
		t.Errorf("empty json export: %d, %v, %q", n, err, b.String())
	}
	b.Reset()
	var uc *UnknownCrawlError
	if n, err := Export(t.Context(), cfg, ExportOptions{Crawl: "nothing-here", Format: "json"}, &b); !errors.As(err, &uc) || n != 0 || b.Len() != 0 {
		t.Errorf("export of a crawl that does not exist: %d, %v, %q; want an UnknownCrawlError and nothing written", n, err, b.String())
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

// TestExportFile writes items to files as master export -o and master
// crawl -o do: a file replaced is whole or untouched, and --append
// continues JSON Lines (a last line without its newline gets one), a JSON
// array (empty or not) and CSV under its header, whose columns the rows
// must fit; Since keeps the items stored from then on.
func TestExportFile(t *testing.T) {
	cfg := seedsConfig(t, 1)
	st, err := OpenStore(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	crawl := cfg.Crawl.Name
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli()
	insert := func(id, u, data string) {
		t.Helper()
		if err := st.Insert(t.Context(), []events.Envelope{{ID: id, Item: &events.Item{Crawl: crawl, Rule: "docs",
			Item: "page", URL: u, Data: json.RawMessage(data), FetchedAt: at}}}); err != nil {
			t.Fatal(err)
		}
	}
	insert("1-1", "http://a.test/1", `{"title": "One"}`)
	time.Sleep(5 * time.Millisecond) // updated_at is kept to the millisecond
	since := time.Now()
	insert("1-2", "http://a.test/2", `{"title": "Two"}`)
	one := `{"url":"http://a.test/1","title":"One"}`
	two := `{"url":"http://a.test/2","title":"Two"}`
	fields := []string{"url", "title"}
	for _, tc := range []struct {
		name   string
		file   string // what the file holds before ("": none)
		format string
		append bool
		opt    ExportOptions
		want   string
		err    string // an error saying this, the file left as it was
	}{
		{"replace", "old\n", "jsonl", false, ExportOptions{Fields: fields}, one + "\n" + two + "\n", ""},
		{"replace, unknown crawl", "old\n", "jsonl", false, ExportOptions{Crawl: "nothing-here", Fields: fields}, "", "nothing-here"},
		{"jsonl append", one + "\n", "jsonl", true, ExportOptions{Fields: fields, Since: since}, one + "\n" + two + "\n", ""},
		{"jsonl append, no newline", one, "jsonl", true, ExportOptions{Fields: fields, Since: since}, one + "\n" + two + "\n", ""},
		{"jsonl append, unknown crawl", one, "jsonl", true, ExportOptions{Crawl: "nothing-here", Fields: fields}, "", "nothing-here"},
		{"json append", "[\n" + one + "\n]\n", "json", true, ExportOptions{Fields: fields, Since: since},
			"[\n" + one + ",\n" + two + "\n]\n", ""},
		{"json append to an empty array", "[\n]\n", "json", true, ExportOptions{Fields: fields},
			"[\n" + one + ",\n" + two + "\n]\n", ""},
		{"json append, nothing new", "[\n" + one + "\n]\n", "json", true,
			ExportOptions{Fields: fields, Since: time.Now().Add(time.Hour)}, "[\n" + one + "\n]\n", ""},
		{"json append to no file", "", "json", true, ExportOptions{Fields: fields}, "[\n" + one + ",\n" + two + "\n]\n", ""},
		{"json append to no array", "{}\n", "json", true, ExportOptions{Fields: fields}, "", "not a JSON array"},
		{"csv append", "url,title\nhttp://a.test/1,One", "csv", true, ExportOptions{Fields: fields, Since: since},
			"url,title\nhttp://a.test/1,One\nhttp://a.test/2,Two\n", ""},
		{"csv append, other columns", "title,url\n", "csv", true, ExportOptions{Fields: fields}, "", "not --item-fields url,title"},
		{"csv append with the envelope", "crawl,rule,item,url,fetched_at,title\n", "csv", true, ExportOptions{Since: since},
			"crawl,rule,item,url,fetched_at,title\n" + crawl + ",docs,page,http://a.test/2,2026-01-02T03:04:05Z,Two\n", ""},
		{"csv append, a field the header lacks", "crawl,rule,item,url,fetched_at,words\n", "csv", true, ExportOptions{},
			"", "fields the file's header lacks (title)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "items."+tc.format)
			if tc.file != "" {
				if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			opt := tc.opt
			if opt.Crawl == "" {
				opt.Crawl = crawl
			}
			f, err := OpenExport(path, tc.format, tc.append)
			if err == nil {
				_, err = f.Write(t.Context(), cfg, opt)
			}
			want := tc.want
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				want = tc.file
			} else if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(path)
			if d := cmp.Diff(want, string(b)); d != "" {
				t.Errorf("the file (-want +got):\n%s", d)
			}
			if tc.format == "json" && tc.err == "" {
				var v []map[string]any
				if err := json.Unmarshal(b, &v); err != nil {
					t.Errorf("not a JSON array: %v", err)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}
