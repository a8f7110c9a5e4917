package sitemap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/urlx"
)

// peerCase is one document of ../shared/conformance/sitemap/cases.json:
// crawler-commons' and Scrapy's own sitemap tests (the file's "fields"
// describes each key). Absent keys are not checked.
type peerCase struct {
	Name           string      `json:"name"`
	Input          *string     `json:"input"`
	InputFile      string      `json:"input_file"`
	Format         string      `json:"format"`
	Err            string      `json:"err"`
	Locs           *[]string   `json:"locs"`
	Count          *int        `json:"count"`
	Contains       []string    `json:"contains"`
	Entries        []peerEntry `json:"entries"`
	Exact          bool        `json:"exact"`
	Canon          bool        `json:"canon"`
	MustNotContain string      `json:"must_not_contain"`
	Option         string      `json:"option"`
	MaxBytes       int64       `json:"max_bytes"`
}

// peerEntry checks the fields of the entry with Loc.
type peerEntry struct {
	Loc        string          `json:"loc"`
	LastMod    *string         `json:"lastmod"`    // RFC 3339; "" = zero
	ChangeFreq *string         `json:"changefreq"` // as Entry.ChangeFreq
	Priority   json.RawMessage `json:"priority"`   // a number, or "none" = HasPriority false
}

// lastmodCase is one of the file's lastmod_cases: ParseLastMod(In) in UTC
// RFC 3339 ("" = the zero time).
type lastmodCase struct {
	Name string `json:"name"`
	In   string `json:"in"`
	Want string `json:"want"`
}

// peerDifferences are the cases where this package deliberately reads a
// document differently from the peer, keyed by case name, with the
// reason. Each must fail its checks (else it is to be dropped from here);
// every other case must pass.
var peerDifferences = map[string]string{
	"scrapy/test_xml_entity_expansion": whyEntity,
	// Cases that need a non-default option of the peer.
	"cc/testSitemapXXEWithDocTypeAllowed": whyEntity,
	"cc/testSitemapTXTfilterUrls":         whyNoScheme,
	"cc/testSitemapXMLfilterUrls":         whyNoScheme,
	"cc/testPartialSitemapsAllowed": "an entry cut inside its <loc> is dropped: the URL may be cut too, and a cut URL is " +
		"another page (an entry whose </loc> was read is kept, as testPartialSitemapIndicesAllowed)",
}

const (
	whyEntity = "a reference to an entity the document declares (&xxe;) is a syntax error: the entries before it are " +
		"kept and the error recorded, never a URL with the reference silently dropped (that is another URL than the one written); " +
		"entity declarations are never read (no XXE, no expansion bomb)"
	whyNoScheme = "a <loc> or line without scheme (www.example.com/) is invalid, as the protocol requires absolute URLs " +
		"and urlx refuses to guess http: (crawler-commons' BasicURLNormalizer guesses)"
)

// TestConformancePeers runs every case of the peers' sitemap tests through
// Parse (and ParseLastMod). The tally separates the peers' default
// behaviour from cases that rely on a non-default peer option.
func TestConformancePeers(t *testing.T) {
	var file struct {
		Cases        []peerCase    `json:"cases"`
		LastmodCases []lastmodCase `json:"lastmod_cases"`
	}
	path := testutil.ConformanceJSON(t, "sitemap/cases.json", &file)
	if len(file.Cases) == 0 || len(file.LastmodCases) == 0 {
		t.Fatal("no conformance cases")
	}
	dir := filepath.Dir(path)
	canon, err := urlx.NewCanonicalizer(nil)
	if err != nil {
		t.Fatal(err)
	}
	type tally struct{ agree, differ, total int }
	var byDefault, byOption tally
	diffs := testutil.NewDifferences(t, peerDifferences)
	for _, c := range file.Cases {
		tl := &byDefault
		if c.Option != "" {
			tl = &byOption
		}
		tl.total++
		switch diffs.Check(c.Name, checkPeerCase(t, dir, canon, c)) {
		case testutil.Agree:
			tl.agree++
		case testutil.Differ:
			tl.differ++
		}
	}
	lastmods := 0
	for _, c := range file.LastmodCases {
		if got := rfc3339(ParseLastMod(c.In)); got != c.Want {
			t.Errorf("%s: ParseLastMod(%q) = %q, want %q", c.Name, c.In, got, c.Want)
			continue
		}
		lastmods++
	}
	diffs.Done()
	t.Logf("peer default behaviour: %d/%d documents and %d/%d lastmod strings agree, %d deliberate differences; "+
		"non-default peer options: %d/%d agree, %d deliberate differences",
		byDefault.agree, byDefault.total, lastmods, len(file.LastmodCases), byDefault.differ,
		byOption.agree, byOption.total, byOption.differ)
}

// rfc3339 formats a lastmod as the cases write it; "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// checkPeerCase parses one case's document and returns what differs from
// the peer's expectation.
func checkPeerCase(t *testing.T, dir string, canon *urlx.Canonicalizer, c peerCase) []string {
	t.Helper()
	var in []byte
	switch {
	case c.Input != nil:
		doNotVisit := filepath.Join(dir, "cc", "do-not-visit.txt")
		in = []byte(strings.ReplaceAll(*c.Input, "@DONOTVISIT@", doNotVisit))
	case c.InputFile != "":
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(c.InputFile)))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		in = b
	default:
		t.Fatalf("%s: no input", c.Name)
	}
	res, err := Parse(bytes.NewReader(in), Limits{MaxBytes: c.MaxBytes})
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	switch c.Err {
	case "none":
		if err != nil {
			fail("error %v, want none", err)
		}
	case "any":
		if err == nil {
			fail("no error, want one")
		}
	case "too-large":
		if !errors.Is(err, ErrTooLarge) {
			fail("error %v, want ErrTooLarge", err)
		}
	case "":
	default:
		t.Fatalf("%s: unknown err %q", c.Name, c.Err)
	}
	if c.Format != "" && res.Format.String() != c.Format {
		fail("format %v, want %s", res.Format, c.Format)
	}

	locs := make([]string, 0, len(res.Entries))
	byLoc := map[string]Entry{}
	for _, e := range res.Entries {
		loc := e.Loc
		if c.Canon {
			u, err := canon.Canonicalize(loc)
			if err != nil {
				continue
			}
			loc = u.String()
		}
		locs = append(locs, loc)
		if _, dup := byLoc[loc]; !dup {
			byLoc[loc] = e
		}
	}
	if c.Locs != nil {
		if d := cmp.Diff(*c.Locs, locs); d != "" {
			fail("locs (-peer +ours):\n%s", d)
		}
	}
	if c.Count != nil && len(locs) != *c.Count {
		fail("%d entries, want %d", len(locs), *c.Count)
	}
	for _, want := range c.Contains {
		if !slices.Contains(locs, want) {
			fail("no entry %s", want)
		}
	}
	if c.MustNotContain != "" {
		for _, l := range locs {
			if strings.Contains(l, c.MustNotContain) {
				fail("entry %s contains %q", l, c.MustNotContain)
			}
		}
	}
	if c.Exact {
		want := make([]string, len(c.Entries))
		for i, e := range c.Entries {
			want[i] = e.Loc
		}
		if d := cmp.Diff(want, locs); d != "" {
			fail("entries (-peer +ours):\n%s", d)
		}
	}
	for _, want := range c.Entries {
		got, ok := byLoc[want.Loc]
		if !ok {
			if !c.Exact {
				fail("no entry %s", want.Loc)
			}
			continue
		}
		problems = append(problems, entryProblems(t, c.Name, want, got)...)
	}
	return problems
}

// entryProblems compares the fields the peer checks on one entry.
func entryProblems(t *testing.T, name string, want peerEntry, got Entry) []string {
	t.Helper()
	var problems []string
	if want.LastMod != nil {
		wantTime := time.Time{}
		if *want.LastMod != "" {
			var err error
			if wantTime, err = time.Parse(time.RFC3339Nano, *want.LastMod); err != nil {
				t.Fatalf("%s: lastmod %q: %v", name, *want.LastMod, err)
			}
		}
		if !got.LastMod.Equal(wantTime) {
			problems = append(problems, fmt.Sprintf("%s: lastmod %q, want %q", want.Loc, rfc3339(got.LastMod), *want.LastMod))
		}
	}
	if want.ChangeFreq != nil && got.ChangeFreq != *want.ChangeFreq {
		problems = append(problems, fmt.Sprintf("%s: changefreq %q, want %q", want.Loc, got.ChangeFreq, *want.ChangeFreq))
	}
	if len(want.Priority) > 0 {
		var p any
		if err := json.Unmarshal(want.Priority, &p); err != nil {
			t.Fatalf("%s: priority %s: %v", name, want.Priority, err)
		}
		switch p := p.(type) {
		case string: // "none"
			if got.HasPriority {
				problems = append(problems, fmt.Sprintf("%s: priority %v, want none", want.Loc, got.Priority))
			}
		case float64:
			if !got.HasPriority || got.Priority != p {
				problems = append(problems, fmt.Sprintf("%s: priority %v (has %v), want %v", want.Loc, got.Priority, got.HasPriority, p))
			}
		}
	}
	return problems
}
