package rules

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http/httpguts"
)

// TestFetchSection reads the fetch section's keys, each valid and invalid
// form, with the error at its line and column.
func TestFetchSection(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want Fetch
		errs []string
	}{
		{name: "absent keeps the crawl's", yaml: "fetch: {}\n"},
		{name: "user agents", yaml: "fetch:\n  user_agents: [a/1, \"b/2 (+http://x)\"]\n",
			want: Fetch{UserAgents: []string{"a/1", "b/2 (+http://x)"}}},
		{name: "user agents empty list", yaml: "fetch:\n  user_agents: []\n",
			errs: []string{"2:16: user_agents: empty (leave it out for the crawl's)"}},
		{name: "user agents not a list", yaml: "fetch:\n  user_agents: a/1\n",
			errs: []string{`2:16: user_agents: want a list, got the string "a/1"`}},
		{name: "user agent blank", yaml: "fetch:\n  user_agents: [\"  \"]\n",
			errs: []string{`2:17: user agent "  ": empty`}},
		{name: "user agent with a tab", yaml: "fetch:\n  user_agents: [\"a\\tb\"]\n",
			want: Fetch{UserAgents: []string{"a\tb"}}},
		{name: "user agent with DEL", yaml: "fetch:\n  user_agents: [\"a\\x7fb\"]\n",
			errs: []string{`2:17: user agent "a\x7fb": control characters (CR, LF...) are not allowed`}},
		{name: "headers canonical", yaml: "fetch:\n  headers: {accept-language: de, X-TOKEN: 42, Cookie: 'a=1; b=2'}\n",
			want: Fetch{Headers: http.Header{"Accept-Language": {"de"}, "X-Token": {"42"}, "Cookie": {"a=1; b=2"}}}},
		{name: "headers empty value", yaml: "fetch:\n  headers: {X-Empty: ''}\n",
			want: Fetch{Headers: http.Header{"X-Empty": {""}}}},
		{name: "headers empty mapping", yaml: "fetch:\n  headers: {}\n",
			errs: []string{"2:12: headers: empty (leave it out for none)"}},
		{name: "headers a list", yaml: "fetch:\n  headers: [X-A]\n",
			errs: []string{"2:12: headers: want a mapping of header names to values, got a list"}},
		{name: "header null value", yaml: "fetch:\n  headers: {X-A: }\n",
			errs: []string{"2:18: header X-A: want a string, got nothing"}},
		{name: "header value with LF", yaml: "fetch:\n  headers: {X-A: \"1\\n2\"}\n",
			errs: []string{"2:18: header X-A: control characters (CR, LF...) are not allowed in a value"}},
		{name: "header name with a colon", yaml: "fetch:\n  headers: {'X-A:': 1}\n",
			errs: []string{`2:13: header name "X-A:": want letters, digits and - (RFC 9110 token)`}},
		{name: "header the slave sets", yaml: "fetch:\n  headers: {accept-encoding: br, If-Modified-Since: x, proxy-authorization: y}\n",
			errs: []string{
				`2:13: header "accept-encoding" may not be set by a rule file (the slave asks for the encodings it decodes)`,
				`2:34: header "If-Modified-Since" may not be set by a rule file (a recrawl's conditional header)`,
				`2:56: header "proxy-authorization" may not be set by a rule file (the proxy URL's credentials)`,
			}},
		{name: "header twice in two cases", yaml: "fetch:\n  headers: {x-a: 1, X-A: 2}\n",
			errs: []string{`2:21: duplicate header "X-A"`}},
		{name: "retry statuses", yaml: "fetch:\n  retry_statuses: [404, 599, 400]\n",
			want: Fetch{RetryStatuses: []int{404, 599, 400}}},
		{name: "retry statuses empty retries none", yaml: "fetch:\n  retry_statuses: []\n",
			want: Fetch{RetryStatuses: []int{}}},
		{name: "retry status 2xx", yaml: "fetch:\n  retry_statuses: [200]\n",
			errs: []string{"2:20: retry status 200: want a 4xx or 5xx status (400 to 599)"}},
		{name: "retry status a float", yaml: "fetch:\n  retry_statuses: [404.5]\n",
			errs: []string{"2:20: retry_statuses: want an integer status, got a number"}},
		{name: "retry statuses not a list", yaml: "fetch:\n  retry_statuses: 503\n",
			errs: []string{"2:19: retry_statuses: want a list, got an integer"}},
		{name: "timeout", yaml: "fetch:\n  timeout: 1m30s\n", want: Fetch{Timeout: 90 * time.Second}},
		{name: "timeout zero", yaml: "fetch:\n  timeout: 0s\n",
			errs: []string{"2:12: timeout must be > 0 (leave it out for fetch.timeout)"}},
		{name: "timeout negative", yaml: "fetch:\n  timeout: -1s\n",
			errs: []string{`2:12: bad duration "-1s": must be >= 0`}},
		{name: "timeout without a unit", yaml: "fetch:\n  timeout: 30\n",
			errs: []string{`2:12: bad duration "30": want a number with a unit such as 500ms, 2s or 1m`}},
		{name: "fetch not a mapping", yaml: "fetch: [timeout]\n",
			errs: []string{"1:8: fetch: want a mapping, got a list"}},
		{name: "unknown key", yaml: "fetch:\n  user_agent: a/1\n",
			errs: []string{`2:3: unknown key "user_agent" in fetch (did you mean "user_agents"?)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := build("r", map[string][]byte{"f.yaml": []byte(tc.yaml)}, opts)
			var got []string
			var es Errors
			if errors.As(err, &es) {
				for _, e := range es {
					got = append(got, strings.TrimPrefix(e.Error(), "r/f.yaml:"))
				}
			} else if err != nil {
				t.Fatalf("error %v is not Errors", err)
			}
			if d := cmp.Diff(tc.errs, got); d != "" {
				t.Fatalf("errors (-want +got):\n%s", d)
			}
			if err != nil {
				return
			}
			if d := cmp.Diff(tc.want, s.Sets[0].Fetch); d != "" {
				t.Errorf("fetch (-want +got):\n%s", d)
			}
		})
	}
}

// FuzzFetchSection feeds arbitrary header names and values, user agents,
// statuses and timeouts to the fetch section: a file loads only with a
// header a request can carry and the slave does not set, a user agent a
// request can carry, a 4xx or 5xx status and a positive timeout; an
// invalid one is an error at a line of the file.
func FuzzFetchSection(f *testing.F) {
	f.Add("X-Api-Key", "secret", "Bot/1", 503, "5s")
	f.Add("user-agent", "x", "", 302, "0s")
	f.Add("Bad Name", "a\r\nInjected: 1", "a\nb", 600, "-1s")
	f.Add("Accept-Language", "", "  ", 400, "1h")
	f.Fuzz(func(t *testing.T, name, value, ua string, status int, timeout string) {
		doc := fmt.Sprintf("fetch:\n  headers: {%s: %s}\n  user_agents: [%s]\n  retry_statuses: [%d]\n  timeout: %s\n",
			strconv.Quote(name), strconv.Quote(value), strconv.Quote(ua), status, strconv.Quote(timeout))
		s, err := build("", map[string][]byte{"f.yaml": []byte(doc)}, opts)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %v is not a non-empty Errors", err)
			}
			for _, e := range es {
				if e.Line == 0 || strings.Contains(e.Msg, "internal error") {
					t.Fatalf("error without a line or a panic: %v", e)
				}
			}
			return
		}
		got := s.Sets[0].Fetch
		for k, vs := range got.Headers {
			if !httpguts.ValidHeaderFieldName(k) || k != http.CanonicalHeaderKey(k) || slaveHeaders[k] != "" {
				t.Errorf("header name %q accepted", k)
			}
			for _, v := range vs {
				if !httpguts.ValidHeaderFieldValue(v) {
					t.Errorf("header value %q accepted", v)
				}
			}
		}
		for _, u := range got.UserAgents {
			if badUserAgent(u) != "" {
				t.Errorf("user agent %q accepted", u)
			}
		}
		for _, st := range got.RetryStatuses {
			if st < 400 || st > 599 {
				t.Errorf("retry status %d accepted", st)
			}
		}
		if got.Timeout <= 0 {
			t.Errorf("timeout %v accepted", got.Timeout)
		}
	})
}
