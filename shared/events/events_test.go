package events

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, c := range []struct {
		name string
		in   any // a pointer to a record
		want Envelope
	}{{
		name: "page",
		in: &Page{Crawl: "c", URL: "http://a.test/", FinalURL: "http://a.test/", Status: 200, ContentType: "text/html",
			Bytes: 512, Depth: 1, FetchedAt: 1_700_000_000_123, Slave: "s1", ContentHash: strings.Repeat("ab", 32),
			DurationMS: 40, Attempt: 1, Links: 3},
		want: Envelope{ID: "1-1", Type: TypePage},
	}, {
		name: "page with fetch pipeline fields",
		in: &Page{Crawl: "c", URL: "http://a.test/", Status: 200, Charset: "windows-1252", WARC: "s1-00001.warc.gz:1234",
			Proxy: "http://***@p.test:8080", Handler: "html", Checksum: "00ff00ff00ff00ff"},
		want: Envelope{ID: "1-1", Type: TypePage},
	}, {
		name: "exception",
		in:   &Exception{Crawl: "c", Kind: KindTrap, URL: "http://a.test/a/a/a/a", Host: "a.test", Message: "repeated path segment", At: 5},
		want: Envelope{ID: "1-1", Type: TypeException},
	}, {
		name: "slave",
		in:   &Slave{Crawl: "c", Slave: "s1", Kind: SlaveJoin, Host: "box", At: 1},
		want: Envelope{ID: "1-1", Type: TypeSlave},
	}, {
		name: "heartbeat",
		in:   &Heartbeat{Crawl: "c", Slave: "s1", PagesPerSec: 2.5, State: "running"},
		want: Envelope{ID: "1-1", Type: TypeHeartbeat},
	}, {
		name: "lost",
		in:   &Lost{Crawl: "c", URL: "http://a.test/", Reason: LostExpired},
		want: Envelope{ID: "1-1", Type: TypeLost},
	}, {
		name: "proxy",
		in: &Proxy{Crawl: "c", Slave: "s1", Proxy: "socks5://***@10.0.0.9:1080", State: ProxyCooling,
			Reason: "ban: HTTP 403", Errors: 3, Uses: 120, At: 1_700_000_000_456},
		want: Envelope{ID: "1-1", Type: TypeProxy},
	}, {
		name: "duplicate",
		in: &Duplicate{Crawl: "c", URL: "http://a.test/b", FirstURL: "http://a.test/a", ContentHash: "0123456789abcdef",
			Slave: "s2", At: 1_700_000_000_789},
		want: Envelope{ID: "1-1", Type: TypeDuplicate},
	}, {
		name: "item",
		in: &Item{Crawl: "c", Rule: "shop", Item: "product", URL: "http://a.test/p/1",
			Data: json.RawMessage(`{"title":"Tea ☕","price":3.5,"tags":["a","b"]}`), Slave: "s1", FetchedAt: 1_700_000_000_999},
		want: Envelope{ID: "1-1", Type: TypeItem},
	}, {
		name: "item without data",
		in:   &Item{Crawl: "c", Rule: "shop", Item: "product", URL: "http://a.test/p/2", Data: json.RawMessage(`null`)},
		want: Envelope{ID: "1-1", Type: TypeItem},
	}, {
		name: "page with render fields",
		in:   &Page{Crawl: "c", URL: "http://a.test/", Status: 200, Rendered: true, RuleSet: "shop"},
		want: Envelope{ID: "1-1", Type: TypePage},
	}, {
		name: "render exception with snapshot",
		in: &Exception{Crawl: "c", Kind: KindRenderTimeout, URL: "http://a.test/", Host: "a.test",
			Message: "render: no network idle after 30s", Snapshot: "snapshots/c/0001.html", At: 7},
		want: Envelope{ID: "1-1", Type: TypeException},
	}, {
		name: "heartbeat of a rendering slave",
		in:   &Heartbeat{Crawl: "c", Slave: "s1", State: "running", Render: true, RulesVersion: "3f2a9c"},
		want: Envelope{ID: "1-1", Type: TypeHeartbeat},
	}} {
		t.Run(c.name, func(t *testing.T) {
			switch v := c.in.(type) {
			case *Page:
				c.want.Page = v
			case *Exception:
				c.want.Exception = v
			case *Slave:
				c.want.Slave = v
			case *Heartbeat:
				c.want.Heartbeat = v
			case *Lost:
				c.want.Lost = v
			case *Proxy:
				c.want.Proxy = v
			case *Duplicate:
				c.want.Duplicate = v
			case *Item:
				c.want.Item = v
			}
			typ, data, err := Encode(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if typ != c.want.Type {
				t.Errorf("Encode type %q, want %q", typ, c.want.Type)
			}
			got, err := Decode("1-1", typ, data)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("round trip (-want +got):\n%s", d)
			}
			// Values encode like pointers.
			typ2, data2, err := Encode(deref(c.in))
			if err != nil || typ2 != typ || string(data2) != string(data) {
				t.Errorf("Encode by value = %q, %s, %v; want %q, %s", typ2, data2, err, typ, data)
			}
		})
	}
}

// deref returns the record c points to, as a value.
func deref(c any) any {
	switch v := c.(type) {
	case *Page:
		return *v
	case *Exception:
		return *v
	case *Slave:
		return *v
	case *Heartbeat:
		return *v
	case *Lost:
		return *v
	case *Proxy:
		return *v
	case *Duplicate:
		return *v
	case *Item:
		return *v
	}
	return nil
}

// TestJSONNames pins the wire names of the records built outside Go (Lua
// scripts) or read by other tools.
func TestJSONNames(t *testing.T) {
	for _, c := range []struct {
		name string
		in   any
		want []string
	}{
		{"proxy", Proxy{}, []string{"at", "crawl", "errors", "proxy", "reason", "slave", "state", "uses"}},
		{"duplicate", Duplicate{}, []string{"at", "content_hash", "crawl", "first_url", "slave", "url"}},
		{"page without pipeline fields", Page{}, []string{"attempt", "bytes", "content_hash", "content_type", "crawl",
			"depth", "duration_ms", "fetched_at", "final_url", "links", "slave", "status", "url"}},
		{"page with pipeline fields", Page{Charset: "utf-8", WARC: "w.warc.gz:0", Proxy: ProxyDirect, Handler: "html",
			Checksum: "0000000000000000"}, []string{"attempt", "bytes", "charset", "checksum", "content_hash",
			"content_type", "crawl", "depth", "duration_ms", "fetched_at", "final_url", "handler", "links", "proxy",
			"slave", "status", "url", "warc"}},
		{"page with render fields", Page{Rendered: true, RuleSet: "shop"}, []string{"attempt", "bytes", "content_hash",
			"content_type", "crawl", "depth", "duration_ms", "fetched_at", "final_url", "links", "rendered", "rule",
			"slave", "status", "url"}},
		{"item", Item{Data: json.RawMessage(`{}`)}, []string{"crawl", "data", "fetched_at", "item", "rule", "slave", "url"}},
		{"exception without snapshot", Exception{}, []string{"at", "attempt", "crawl", "host", "kind", "message",
			"slave", "status", "url"}},
		{"exception with snapshot", Exception{Snapshot: "s.html"}, []string{"at", "attempt", "crawl", "host", "kind",
			"message", "slave", "snapshot", "status", "url"}},
		{"heartbeat without rules", Heartbeat{}, []string{"at", "bytes", "concurrency", "crawl", "errors", "host",
			"in_flight", "pages", "pages_per_sec", "pid", "render", "rss", "slave", "started_at", "state"}},
		{"heartbeat with rules", Heartbeat{RulesVersion: "v1"}, []string{"at", "bytes", "concurrency", "crawl", "errors",
			"host", "in_flight", "pages", "pages_per_sec", "pid", "render", "rss", "rules_version", "slave", "started_at",
			"state"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, data, err := Encode(c.in)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			var got []string
			for k := range m {
				got = append(got, k)
			}
			slices.Sort(got)
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("JSON names (-want +got):\n%s", d)
			}
		})
	}
}

// TestDecodeLuaJSON decodes records as Redis's cjson.encode writes them:
// keys in any order, "/" escaped, integers as plain numbers.
func TestDecodeLuaJSON(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  Type
		data string
		want Envelope
	}{{
		name: "duplicate",
		typ:  TypeDuplicate,
		data: `{"slave":"s1","content_hash":"00ab00cd00ef0012","url":"http:\/\/a.test\/b?x=1","at":1700000000123,` +
			`"first_url":"http:\/\/a.test\/a","crawl":"news"}`,
		want: Envelope{ID: "7-0", Type: TypeDuplicate, Duplicate: &Duplicate{Crawl: "news", URL: "http://a.test/b?x=1",
			FirstURL: "http://a.test/a", ContentHash: "00ab00cd00ef0012", Slave: "s1", At: 1700000000123}},
	}, {
		name: "duplicate with missing fields",
		typ:  TypeDuplicate,
		data: `{"crawl":"news","url":"http:\/\/a.test\/"}`,
		want: Envelope{ID: "7-0", Type: TypeDuplicate, Duplicate: &Duplicate{Crawl: "news", URL: "http://a.test/"}},
	}, {
		name: "proxy",
		typ:  TypeProxy,
		data: `{"uses":10,"state":"retired","errors":5,"at":1,"reason":"too many errors","proxy":"http:\/\/p.test:3128","slave":"s","crawl":"c"}`,
		want: Envelope{ID: "7-0", Type: TypeProxy, Proxy: &Proxy{Crawl: "c", Slave: "s", Proxy: "http://p.test:3128",
			State: ProxyRetired, Reason: "too many errors", Errors: 5, Uses: 10, At: 1}},
	}, {
		name: "item",
		typ:  TypeItem,
		data: `{"data":{"title":"T\u00e9","n":[1,2]},"url":"http:\/\/a.test\/p","item":"product","rule":"shop",` +
			`"fetched_at":1700000000123,"slave":"s1","crawl":"c"}`,
		want: Envelope{ID: "7-0", Type: TypeItem, Item: &Item{Crawl: "c", Rule: "shop", Item: "product",
			URL: "http://a.test/p", Data: json.RawMessage(`{"title":"T\u00e9","n":[1,2]}`), Slave: "s1",
			FetchedAt: 1700000000123}},
	}} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Decode("7-0", c.typ, []byte(c.data))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestEncodeDecodeErrors(t *testing.T) {
	if _, _, err := Encode(struct{}{}); err == nil || !strings.Contains(err.Error(), "unknown record") {
		t.Errorf("Encode(struct{}{}) error = %v, want unknown record", err)
	}
	for _, c := range []struct {
		name string
		typ  Type
		data string
		want string
	}{
		{"unknown type", "nope", `{}`, `decode event 1-0: unknown type "nope"`},
		{"bad json", TypeProxy, `{"crawl":`, "decode proxy event 1-0: "},
		{"string for a number", TypeDuplicate, `{"at":"12"}`, "decode duplicate event 1-0: "},
		{"float for an int", TypeProxy, `{"errors":1.5}`, "decode proxy event 1-0: "},
		{"string for item time", TypeItem, `{"fetched_at":"1"}`, "decode item event 1-0: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode("1-0", c.typ, []byte(c.data))
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("Decode error = %v, want prefix %q", err, c.want)
			}
		})
	}
}

func TestFormatChecksum(t *testing.T) {
	for _, c := range []struct {
		in   uint64
		want string
	}{
		{0, "0000000000000000"},
		{0xabc, "0000000000000abc"},
		{0xDEADBEEFCAFEF00D, "deadbeefcafef00d"},
		{^uint64(0), "ffffffffffffffff"},
	} {
		got := FormatChecksum(c.in)
		if got != c.want || len(got) != ChecksumLen {
			t.Errorf("FormatChecksum(%#x) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestEncodeItemInvalidData(t *testing.T) {
	_, _, err := Encode(&Item{Crawl: "c", Data: json.RawMessage(`{"a":`)})
	if err == nil || !strings.HasPrefix(err.Error(), "encode item event: ") {
		t.Errorf("Encode error = %v, want prefix %q", err, "encode item event: ")
	}
}

func TestKinds(t *testing.T) {
	// Exception kinds are stored in exceptions.kind, VARCHAR(32), and must
	// stay distinct.
	kinds := []string{KindDNS, KindConnect, KindTimeout, KindTLS, KindHTTPStatus, KindTooLarge, KindRobotsDenied,
		KindParse, KindRedirect, KindBlocked, KindFailed, KindTrap, KindProxy, KindCharset, KindExtract, KindRules,
		KindOther, KindRender, KindRenderTimeout, KindRenderCrash, KindRenderNavigation}
	seen := map[string]bool{}
	for _, k := range kinds {
		if len(k) == 0 || len(k) > 32 || seen[k] {
			t.Errorf("kind %q: empty, longer than 32 or repeated", k)
		}
		seen[k] = true
	}
	want := map[string]string{"extract": KindExtract, "rules": KindRules, "render": KindRender,
		"render_timeout": KindRenderTimeout, "render_crash": KindRenderCrash, "render_navigation": KindRenderNavigation}
	for w, k := range want {
		if w != k {
			t.Errorf("kind %q, want %q", k, w)
		}
	}
}

// BenchmarkDecodePage times the sink's decoding of a page event as a
// slave writes one.
//
//	go test -run '^$' -bench DecodePage -benchmem ./shared/events/
func BenchmarkDecodePage(b *testing.B) {
	_, data, err := Encode(&Page{Crawl: "bench", URL: "http://h01.bench.test/page/37", FinalURL: "http://h01.bench.test/page/37",
		Status: 200, ContentType: "text/html; charset=utf-8", Bytes: 15003, Depth: 1, FetchedAt: 1795403045380, Slave: "bench-s1",
		ContentHash: "1f092cb6a1c5abf3be4b41362a91211374eb9a0c", DurationMS: 7, Links: 8, Charset: "utf-8", Proxy: "direct",
		Handler: "html", Checksum: "1e1317a5bac7e063"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for range b.N {
		if _, err := Decode("1-1", TypePage, data); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecode feeds Decode what a slave or a function could write to a
// stream: it never panics, and what encoding/json reads it reads the same.
func FuzzDecode(f *testing.F) {
	f.Add(`{"crawl":"c","url":"http://a.test/","status":200,"fetched_at":1700000000123,"slave":"s1"}`)
	f.Add(`{"Crawl":"c","URL":"x","url":"y","status":1e3,"links":-1}`)
	f.Add(`{"crawl":"\xff\u00e9","data":{"a":[1,2]},"item":"p","fetched_at":null}`)
	f.Fuzz(func(t *testing.T, data string) {
		for _, typ := range []Type{TypePage, TypeItem, TypeException} {
			got, err := Decode("1-1", typ, []byte(data))
			// an envelope holding a zero record of the type, which
			// encoding/json then reads data into
			want, zerr := Decode("1-1", typ, []byte("{}"))
			if zerr != nil {
				t.Fatal(zerr)
			}
			var target any
			for ev, i := reflect.ValueOf(&want).Elem(), 0; i < ev.NumField(); i++ {
				if f := ev.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
					target = f.Interface()
				}
			}
			werr := json.Unmarshal([]byte(data), target)
			if werr == nil && err != nil {
				t.Fatalf("%s %q: encoding/json reads it, Decode: %v", typ, data, err)
			}
			if werr != nil || err != nil {
				continue // refused by both, or by encoding/json only
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("%s %q (-encoding/json +Decode):\n%s", typ, data, d)
			}
		}
	})
}
