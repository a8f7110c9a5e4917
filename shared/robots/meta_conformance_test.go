package robots_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/robots"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// metaCase is one case of ../shared/conformance/robotsmeta/cases.json:
// Nutch's, StormCrawler's, Norconex's and spatie's robots meta tag and
// X-Robots-Tag tests.
type metaCase struct {
	Name     string   `json:"name"`
	Kind     string   `json:"kind"` // "html" or "header"
	HTML     *string  `json:"html"`
	HTMLFile string   `json:"html_file"`
	DocURL   string   `json:"doc_url"`
	Values   []string `json:"values"`
	Token    string   `json:"token"`
	Want     metaWant `json:"want"`
}

// metaWant is what the peer expects; nil fields are not checked.
type metaWant struct {
	NoIndex   *bool   `json:"noindex"`
	NoFollow  *bool   `json:"nofollow"`
	NoArchive *bool   `json:"noarchive"` // the peers' "noCache"
	BaseHref  *string `json:"base_href"`
}

// Where a peer departs from Google's documented robots meta tag
// (developers.google.com/search/docs/crawling-indexing/robots-meta-tag),
// redcrawl follows Google.
const (
	whyNoneNoCache = "\"none\" is noindex, nofollow, as Google documents it; StormCrawler also reads it as noCache (noarchive)"
	whyPragma      = "<meta http-equiv=\"pragma\" content=\"no-cache\"> is an HTTP cache directive, not a robots directive " +
		"(Google reads only robots meta tags and X-Robots-Tag); Nutch reads it as noCache (noarchive)"
)

// metaDifferences are the cases where redcrawl deliberately answers
// otherwise than the peer, keyed by case name, with the reason. Each must
// fail (else it is to be dropped from here); every other case must pass.
var metaDifferences = map[string]string{
	"nutch/TestRobotsMetaProcessor#0 NONE+pragma":                     whyPragma,
	"nutch/TestRobotsMetaProcessor#1 all+pragma":                      whyPragma,
	"nutch/TestRobotsMetaProcessor#2 nOnE+pragma":                     whyPragma,
	"stormcrawler/JSoupParserBoltTest.testRobotsMetaProcessor#0 NONE": whyNoneNoCache,
	"stormcrawler/JSoupParserBoltTest.testRobotsMetaProcessor#2 nOnE": whyNoneNoCache,
	"stormcrawler/JSoupParserBoltTest.testRobotsMetaProcessor#3 none": whyNoneNoCache,
}

// TestConformanceRobotsMeta runs the peers' robots meta cases: an HTML page
// through urlx's link extractor (which reads the robots meta tags and the
// base href), response headers through HeaderDirectives.
func TestConformanceRobotsMeta(t *testing.T) {
	var file struct {
		Cases []metaCase `json:"cases"`
	}
	path := testutil.ConformanceJSON(t, "robotsmeta/cases.json", &file)
	if len(file.Cases) == 0 {
		t.Fatal("no conformance cases")
	}
	canon, err := urlx.NewCanonicalizer(nil)
	if err != nil {
		t.Fatal(err)
	}
	diffs := testutil.NewDifferences(t, metaDifferences)
	for _, c := range file.Cases {
		var got robots.Directives
		baseHref := ""
		switch c.Kind {
		case "html":
			doc, err := url.Parse(c.DocURL)
			if err != nil {
				t.Fatalf("%s: doc_url: %v", c.Name, err)
			}
			links := canon.ExtractLinksWith(doc, metaPage(t, filepath.Dir(path), c), urlx.LinkOptions{})
			got, baseHref = links.Robots, links.BaseHref
		case "header":
			got = robots.HeaderDirectives(c.Values, c.Token)
		default:
			t.Fatalf("%s: unknown kind %q", c.Name, c.Kind)
		}
		diffs.Check(c.Name, metaProblems(c.Want, got, baseHref))
	}
	diffs.Done()
	t.Logf("peer robots meta and X-Robots-Tag: %d/%d cases agree, %d deliberate differences (Google's documented behaviour)",
		diffs.Agree, len(file.Cases), diffs.Differ)
}

// metaPage returns a case's HTML.
func metaPage(t *testing.T, dir string, c metaCase) []byte {
	t.Helper()
	if c.HTML != nil {
		return []byte(*c.HTML)
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(c.HTMLFile)))
	if err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return b
}

// metaProblems lists where got differs from what the peer expects.
func metaProblems(want metaWant, got robots.Directives, baseHref string) []string {
	var problems []string
	check := func(name string, want *bool, got bool) {
		if want != nil && *want != got {
			problems = append(problems, fmt.Sprintf("%s = %v, peer %v", name, got, *want))
		}
	}
	check("noindex", want.NoIndex, got.NoIndex)
	check("nofollow", want.NoFollow, got.NoFollow)
	check("noarchive", want.NoArchive, got.NoArchive)
	if want.BaseHref != nil && *want.BaseHref != baseHref {
		problems = append(problems, fmt.Sprintf("base href %q, peer %q", baseHref, *want.BaseHref))
	}
	return problems
}
