package testutil

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// ConformanceJSON decodes the JSON file sub of the conformance suites
// (ConformanceFile: the test skips when it is absent) into v and returns
// the file's path.
func ConformanceJSON(t testing.TB, sub string, v any) string {
	t.Helper()
	path := ConformanceFile(t, sub)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read conformance cases: %v", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode conformance cases %s: %v", path, err)
	}
	return path
}

// Outcome is how a conformance case compares with its reference.
type Outcome int

const (
	// Agree: the case passes.
	Agree Outcome = iota
	// Differ: the case fails and is listed as a deliberate difference.
	Differ
	// Fail: the case fails unlisted, or passes although listed; the test
	// has failed.
	Fail
)

// Differences checks the cases of a conformance suite against the cases
// where the project deliberately differs from the reference, keyed by case
// name, with the reason: a listed case must fail (else it is to be dropped
// from the list), every other case must pass, and every listed name must
// name a case (Done).
type Differences struct {
	t      testing.TB
	listed map[string]string
	used   map[string]bool
	// Agree and Differ count the cases so far.
	Agree, Differ int
}

// NewDifferences returns a checker for the differences listed.
func NewDifferences(t testing.TB, listed map[string]string) *Differences {
	return &Differences{t: t, listed: listed, used: map[string]bool{}}
}

// Check records case name, given what differs from the reference (none =
// it agrees), and reports the outcome: a listed case is logged with its
// reason, a failure is a test error.
func (d *Differences) Check(name string, problems []string) Outcome {
	d.t.Helper()
	why, listed := d.listed[name]
	switch {
	case listed:
		d.used[name] = true
		if len(problems) == 0 {
			d.t.Errorf("%s: listed as a deliberate difference (%s) but agrees: drop it from the list", name, why)
			return Fail
		}
		d.Differ++
		d.t.Logf("%s: deliberate difference: %s\n\t(%s)", name, why, strings.Join(problems, "; "))
		return Differ
	case len(problems) > 0:
		d.t.Errorf("%s:\n\t%s", name, strings.Join(problems, "\n\t"))
		return Fail
	}
	d.Agree++
	return Agree
}

// Done fails the test for every listed difference that named no case.
func (d *Differences) Done() {
	d.t.Helper()
	for name := range d.listed {
		if !d.used[name] {
			d.t.Errorf("listed difference %q names no case", name)
		}
	}
}
