package urlx

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/slave/content"
)

// linkCase is one page of ../shared/conformance/links/cases.json: Scrapy's
// link extractor tests and StormCrawler's base href test.
type linkCase struct {
	Name        string   `json:"name"`
	HTML        *string  `json:"html"`
	HTMLFile    string   `json:"html_file"`
	HTMLHex     string   `json:"html_hex"`
	DocURL      string   `json:"doc_url"`
	Want        []string `json:"want"`
	NoCanonWant bool     `json:"no_canon_want"`
	ObeyRel     bool     `json:"obey_rel"`
}

// linkCaseCharsets are the encodings the peers' tests give a page out of
// band (Scrapy's HtmlResponse(encoding=...)), sent here as the charset of
// the Content-Type header, as a server would.
var linkCaseCharsets = map[string]string{
	"scrapy/test_restrict_xpaths_with_html_entities": "iso8859-15",
}

// linkDifferences are the cases where redcrawl deliberately extracts other
// links than the peer, keyed by case name, with the reason. Each must fail
// (else it is to be dropped from here); every other case must pass.
var linkDifferences = map[string]string{
	"scrapy/test_ignored_extensions (default deny_extensions)": "links are not dropped by file extension: " +
		"a crawl decides what it fetches with crawl.deny (or a rule set's deny), and a .jpg link may be a page",
	"scrapy/test_ftp_links": whyScheme,
	"scrapy/test_deduplicates_by_canonical_url": "the query is not sorted by default (crawl.sort_query: false): " +
		"parameter order is significant on some sites (repeated keys read as lists, positional parameters, " +
		"signed URLs), and the canonical URL is also the URL fetched; with crawl.sort_query the two links are one",
}

// TestConformanceLinks extracts the links of every page of the peers'
// link extractor tests the way the slave does: the body decoded to UTF-8
// by content.DecodeHTML, then ExtractLinksWith with the encoding it was
// decoded from.
func TestConformanceLinks(t *testing.T) {
	var file struct {
		Cases []linkCase `json:"cases"`
	}
	path := testutil.ConformanceJSON(t, "links/cases.json", &file)
	if len(file.Cases) == 0 {
		t.Fatal("no conformance cases")
	}
	c := newTestCanon(t)
	diffs := testutil.NewDifferences(t, linkDifferences)
	for _, lc := range file.Cases {
		got := extractCase(t, c, filepath.Dir(path), lc)
		want := lc.Want
		if !lc.NoCanonWant {
			want = canonicalSet(c, lc.Want)
		}
		var problems []string
		if d := cmp.Diff(want, got); d != "" {
			problems = append(problems, "links (-peer +ours):\n"+d)
		}
		diffs.Check(lc.Name, problems)
	}
	diffs.Done()
	t.Logf("peer link extraction: %d/%d pages agree, %d deliberate differences", diffs.Agree, len(file.Cases), diffs.Differ)
}

// extractCase returns the links ExtractLinksWith finds in a case's page.
func extractCase(t *testing.T, c *Canonicalizer, dir string, lc linkCase) []string {
	t.Helper()
	var body []byte
	switch {
	case lc.HTML != nil:
		body = []byte(*lc.HTML)
	case lc.HTMLFile != "":
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(lc.HTMLFile)))
		if err != nil {
			t.Fatalf("%s: %v", lc.Name, err)
		}
		body = b
	default:
		b, err := hex.DecodeString(lc.HTMLHex)
		if err != nil {
			t.Fatalf("%s: html_hex: %v", lc.Name, err)
		}
		body = b
	}
	text, enc := decodeHTML(t, body, linkCaseCharsets[lc.Name])
	doc, err := url.Parse(lc.DocURL)
	if err != nil {
		t.Fatalf("%s: doc_url: %v", lc.Name, err)
	}
	links := c.ExtractLinksWith(doc, text, LinkOptions{ObeyRelNoFollow: lc.ObeyRel, Encoding: enc})
	got := []string{}
	for _, u := range links.URLs {
		got = append(got, u.String())
	}
	return got
}

// decodeHTML decodes a page as the slave's HTML handler does, with the
// charset of its Content-Type ("" = none), and returns the text and the
// encoding's name.
func decodeHTML(t *testing.T, page []byte, charset string) ([]byte, string) {
	t.Helper()
	b, err := content.ReadBody(bytes.NewReader(page), content.BodyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ct := "text/html"
	if charset != "" {
		ct += "; charset=" + charset
	}
	r, enc, err := content.DecodeHTML(b, ct)
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return text, enc.Name
}

// canonicalSet canonicalizes the peer's links, dropping those that do not
// canonicalize and repeats (a fragment dropped makes two links one).
func canonicalSet(c *Canonicalizer, links []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, l := range links {
		u, err := c.Canonicalize(l)
		if err != nil || seen[u.String()] {
			continue
		}
		seen[u.String()] = true
		out = append(out, u.String())
	}
	return out
}
