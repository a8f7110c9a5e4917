package workapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/redcrawl/redcrawl/master/workapi"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// FuzzCompleteBody posts whole completion bodies, as a hostile slave may
// write them, to a work API over the real frontier: whatever the body,
// the answer is one of the API's statuses with a JSON body, and every
// record that reaches the slave's stream is about a URL the token leased.
func FuzzCompleteBody(f *testing.F) {
	lim := defaultLimits()
	lim.MaxBody, lim.MaxLinks = 64<<10, 50
	e := newAPIEnvTB(f, lim)
	ctx := context.Background()
	var seeds []frontier.Task
	for i := range 40 {
		seeds = append(seeds, frontier.Task{URL: fmt.Sprintf("http://h%d.test/", i), Host: fmt.Sprintf("h%d.test", i),
			ScopeHost: fmt.Sprintf("h%d.test", i)})
	}
	if _, err := e.front.Seed(ctx, seeds); err != nil {
		f.Fatal(err)
	}
	tok := e.tokens.issue(workapi.Token{Crawl: e.crawl, Slave: "fz"})
	leased := map[string]bool{}
	var claim api.ClaimResponse
	if code := fuzzPost(f, e, tok, api.PathClaim, []byte(`{"max":10}`), &claim); code != http.StatusOK {
		f.Fatalf("claim: %d", code)
	}
	for _, l := range claim.Leases {
		leased[l.URL] = true
	}
	l := claim.Leases[0]
	page, _ := json.Marshal(&events.Page{URL: l.URL, Status: 200, FetchedAt: 1 << 62})
	item, _ := json.Marshal(&events.Item{URL: "http://other.test/", Data: json.RawMessage(`{}`)})
	for _, body := range []string{
		fmt.Sprintf(`{"completions":[{"lease":{"url":%q,"token":%d},"outcome":"done","events":[{"type":"page","data":%s},{"type":"item","data":%s}],"links":[{"url":"http://h1.test/x","depth":0},{"url":"http://h2.test/s","sitemap":9},{"url":"http://h3.test/r","hops":99}]}],"claim":{"max":3}}`,
			l.URL, l.Token, page, item),
		fmt.Sprintf(`{"completions":[{"lease":{"url":%q,"token":%d,"shard":0},"outcome":"retry","retry_in_ms":-5,"content_hash":"00000000000000ff"}]}`, claim.Leases[1].URL, claim.Leases[1].Token),
		`{"completions":[{"lease":{"url":"http://h9.test/","token":999},"outcome":"fail","events":[{"type":"lost","data":{}}]}]}`,
		`{"completions":null}`, `{"completions":[{}]}`, `[]`, `{"completions":[{"links":[{},{},{}]}]}`, "\x00",
	} {
		f.Add([]byte(body))
	}
	stream := e.front.Keys().SlaveEvents("fz")
	last := "0"
	f.Fuzz(func(t *testing.T, body []byte) {
		var res api.CompleteResponse
		code := fuzzPost(t, e, tok, api.PathComplete, body, &res)
		switch code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests:
		default:
			t.Fatalf("status %d for %q", code, body)
		}
		if res.Claim != nil {
			for _, l := range res.Claim.Leases {
				leased[l.URL] = true
			}
		}
		entries, err := e.rdb.XRange(ctx, stream, "("+last, "+").Result()
		if err != nil && !strings.Contains(err.Error(), "ERR") {
			t.Fatal(err)
		}
		for _, en := range entries {
			last = en.ID
			for _, env := range decodeEntry(t, en.Values) {
				for _, u := range urlsOf(env) {
					if u != "" && !leased[u] {
						t.Fatalf("a %s record of %s, which the token never leased, reached its stream (body %q)", env.Type, u, body)
					}
				}
			}
		}
	})
}

func fuzzPost(t testing.TB, e *apiEnv, tok, path string, body []byte, out any) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, req)
	data, _ := io.ReadAll(w.Body)
	if !json.Valid(data) {
		t.Fatalf("%s answered %d with a body that is no JSON: %q", path, w.Code, data)
	}
	if w.Code == http.StatusOK && out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatal(err)
		}
	}
	return w.Code
}

// decodeEntry decodes a stream entry's events: its fields type and data,
// or t0, d0, t1, d1, ... for several (frontier's appendEntries).
func decodeEntry(t *testing.T, vals map[string]any) []events.Envelope {
	t.Helper()
	var out []events.Envelope
	add := func(typ, data any) {
		ts, _ := typ.(string)
		ds, _ := data.(string)
		env, err := events.Decode("", events.Type(ts), []byte(ds))
		if err != nil {
			t.Fatalf("a record on the stream does not decode: %v", err)
		}
		out = append(out, env)
	}
	if typ, ok := vals[events.FieldType]; ok {
		add(typ, vals[events.FieldData])
		return out
	}
	for i := 0; ; i++ {
		typ, ok := vals["t"+strconv.Itoa(i)]
		if !ok {
			return out
		}
		add(typ, vals["d"+strconv.Itoa(i)])
	}
}

// urlsOf are the URLs a record names.
func urlsOf(env events.Envelope) []string {
	switch {
	case env.Page != nil:
		return []string{env.Page.URL}
	case env.Item != nil:
		return []string{env.Item.URL}
	case env.Duplicate != nil:
		return []string{env.Duplicate.URL}
	case env.Exception != nil:
		return []string{env.Exception.URL}
	case env.Lost != nil:
		return []string{env.Lost.URL}
	}
	return nil
}
