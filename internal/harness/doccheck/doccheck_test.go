package doccheck

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseScript(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		want         []simple
	}{
		{"plain", "bin/master seed --crawl news https://example.org/   # a comment",
			[]simple{{line: 1, env: map[string]string{}, words: []string{"bin/master", "seed", "--crawl", "news", "https://example.org/"}}}},
		{"quotes, continuation, env", "CRAWLER_X='a b' bin/master \\\n  export --out \"it's.jsonl\" > /dev/null 2>&1",
			[]simple{{line: 1, env: map[string]string{"CRAWLER_X": "a b"}, words: []string{"bin/master", "export", "--out", "it's.jsonl"}}}},
		{"list and loop", "make build && bin/slave run &\nfor pi in pi1 pi2; do redcrawl-master acl --slave $pi >> users.acl; done",
			[]simple{
				{line: 1, env: map[string]string{}, words: []string{"make", "build"}},
				{line: 1, env: map[string]string{}, words: []string{"bin/slave", "run"}},
				{line: 2, env: map[string]string{}, words: []string{"redcrawl-master", "acl", "--slave", "$pi"}},
			}},
		{"function", "rcm() { CRAWLER_CONFIG=/etc/c.yaml \\\n  redcrawl-master \"$@\"; }",
			[]simple{{line: 1, env: map[string]string{"CRAWLER_CONFIG": "/etc/c.yaml"}, words: []string{"redcrawl-master", "$@"}, funcName: "rcm"}}},
		{"here-document and substitution", "cat > my.yaml <<'EOF'\ncrawl: {name: x}\nEOF\nmysql < <(sed 1d g.sql)\necho $(bin/master dashboard-link)",
			[]simple{
				{line: 1, env: map[string]string{}, words: []string{"cat"}},
				{line: 4, env: map[string]string{}, words: []string{"mysql", "<(sed 1d g.sql)"}},
				{line: 5, env: map[string]string{}, words: []string{"echo", "$(bin/master dashboard-link)"}},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseScript(tc.script, 1)
			for i := range got {
				got[i].text = ""
			}
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(simple{})); d != "" {
				t.Errorf("parseScript(%q) (-want +got):\n%s", tc.script, d)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	f := simple{env: map[string]string{"CRAWLER_CONFIG": "/etc/c.yaml"}, words: []string{"redcrawl-master", "$1", "--json", "${@:2}"}, funcName: "rcm"}
	got := expand(f, Command{Text: "rcm token list", Env: map[string]string{"A": "b"}, Args: []string{"rcm", "token", "list"}})
	want := Command{Text: "rcm token list", Env: map[string]string{"A": "b", "CRAWLER_CONFIG": "/etc/c.yaml"},
		Args: []string{"redcrawl-master", "token", "--json", "list"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("expand (-want +got):\n%s", d)
	}
}
