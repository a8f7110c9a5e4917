package robots

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDirectives(t *testing.T) {
	tests := []struct {
		content string
		want    Directives
	}{
		{"", Directives{}},
		{"all", Directives{}},
		{"index, follow", Directives{}},
		{"noindex", Directives{NoIndex: true}},
		{"NOINDEX", Directives{NoIndex: true}},
		{"nofollow", Directives{NoFollow: true}},
		{"none", Directives{NoIndex: true, NoFollow: true}},
		{"noarchive", Directives{NoArchive: true}},
		{"nocache", Directives{NoArchive: true}},
		{"noindex,nofollow", Directives{NoIndex: true, NoFollow: true}},
		{" NoIndex ,  NoArchive ", Directives{NoIndex: true, NoArchive: true}},
		{"noindex nofollow", Directives{NoIndex: true, NoFollow: true}},
		{"index, noindex", Directives{NoIndex: true}}, // the most restrictive wins
		{"all, none", Directives{NoIndex: true, NoFollow: true}},
		{"max-snippet:20, max-image-preview:large", Directives{}},
		{"nosnippet, notranslate, noimageindex", Directives{}},
		{"no-index, nofollowing", Directives{}}, // not directives
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, ParseDirectives(tt.content)); diff != "" {
			t.Errorf("ParseDirectives(%q) mismatch (-want +got):\n%s", tt.content, diff)
		}
	}
}

func TestHeaderDirectives(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		token  string
		want   Directives
	}{
		{"no header", nil, "redcrawl", Directives{}},
		{"unprefixed applies to all", []string{"noindex"}, "redcrawl", Directives{NoIndex: true}},
		{"list", []string{"noindex, nofollow"}, "redcrawl", Directives{NoIndex: true, NoFollow: true}},
		{"other crawler only", []string{"googlebot: noindex"}, "redcrawl", Directives{}},
		{"us", []string{"redcrawl: nofollow"}, "redcrawl", Directives{NoFollow: true}},
		{"us, any case", []string{"RedCrawl: NoArchive"}, "redcrawl", Directives{NoArchive: true}},
		{"several headers combine", []string{"googlebot: noindex", "redcrawl: nofollow", "noarchive"}, "redcrawl",
			Directives{NoFollow: true, NoArchive: true}},
		{"agent applies to the rest of its value", []string{"googlebot: noindex, nofollow"}, "redcrawl", Directives{}},
		{"all then agent", []string{"noarchive, googlebot: noindex"}, "redcrawl", Directives{NoArchive: true}},
		{"agent then us", []string{"googlebot: noindex, redcrawl: nofollow"}, "redcrawl", Directives{NoFollow: true}},
		{"none", []string{"none"}, "redcrawl", Directives{NoIndex: true, NoFollow: true}},
		{"valued directive is not an agent", []string{"unavailable_after: 25 Jun 2010 15:00:00 PST, noindex"}, "redcrawl",
			Directives{NoIndex: true}},
		{"valued directive for an agent", []string{"redcrawl: max-snippet: 20, noarchive"}, "redcrawl",
			Directives{NoArchive: true}},
		{"defaults lift nothing", []string{"noindex", "redcrawl: all"}, "redcrawl", Directives{NoIndex: true}},
		{"another token", []string{"redcrawl: noindex", "mybot: nofollow"}, "mybot", Directives{NoFollow: true}},
		{"no token: only unprefixed", []string{"redcrawl: noindex", "nofollow"}, "", Directives{NoFollow: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, HeaderDirectives(tt.values, tt.token)); diff != "" {
				t.Errorf("HeaderDirectives(%q, %q) mismatch (-want +got):\n%s", tt.values, tt.token, diff)
			}
		})
	}
}

func TestDirectivesString(t *testing.T) {
	tests := []struct {
		d    Directives
		want string
	}{
		{Directives{}, ""},
		{Directives{NoIndex: true}, "noindex"},
		{Directives{NoFollow: true, NoArchive: true}, "nofollow,noarchive"},
		{Directives{NoIndex: true, NoFollow: true, NoArchive: true}, "noindex,nofollow,noarchive"},
	}
	for _, tt := range tests {
		if got := tt.d.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.d, got, tt.want)
		}
		if back := ParseDirectives(tt.d.String()); back != tt.d {
			t.Errorf("ParseDirectives(%q) = %+v, want %+v", tt.d.String(), back, tt.d)
		}
	}
	if got, want := ProductToken("redcrawl/0.1 (+https://github.com/redcrawl/redcrawl)"), "redcrawl"; got != want {
		t.Errorf("ProductToken = %q, want %q", got, want)
	}
}
