package store

import (
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// slot is a whole-second scheduled time, as cron produces.
var slot = time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)

func TestClaimRun(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	claims := []struct {
		desc              string
		crawl, name, spec string
		due               time.Time
		want              bool
	}{
		{"first claim", "c", "", "@hourly", slot, true},
		{"same slot again", "c", "", "@hourly", slot, false},
		{"same slot, other master's zone", "c", "", "@hourly", slot.In(time.FixedZone("x", 5*3600)), false},
		{"same slot, other spec", "c", "", "@daily", slot, false},
		{"next slot", "c", "", "@hourly", slot.Add(time.Hour), true},
		{"rule set schedule", "c", "site", "@hourly", slot, true},
		{"rule set, name differs in case", "c", "Site", "@hourly", slot, true},
		{"other crawl", "d", "", "@hourly", slot, true},
		{"same slot to the millisecond", "c", "", "@hourly", slot.Add(500 * time.Microsecond), false},
	}
	for _, c := range claims {
		got, err := s.ClaimRun(ctx, c.crawl, c.name, c.spec, c.due, "m1")
		if err != nil {
			t.Fatalf("%s: %v", c.desc, err)
		}
		if got != c.want {
			t.Errorf("%s: claimed = %v, want %v", c.desc, got, c.want)
		}
	}
}

func TestClaimRunConcurrent(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	const n = 8
	claimed := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { claimed[i], errs[i] = s.ClaimRun(ctx, "c", "site", "@daily", slot, "m") })
	}
	wg.Wait()
	winners := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if claimed[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d of %d concurrent claims won, want 1", winners, n)
	}
}

func TestClaimRunRow(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	long := strings.Repeat("é", 300)
	if _, err := s.ClaimRun(ctx, "c", "site", long, slot.Add(1500*time.Millisecond), long); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Spec, Master string
		Due          time.Time
		Seeds        sql.NullInt64
		Fired        bool
	}
	read := func() row {
		t.Helper()
		var r row
		var fired time.Time
		if err := s.DB.QueryRowContext(ctx,
			"SELECT spec, master, due_at, fired_at, seeds FROM schedule_runs WHERE crawl = 'c' AND name = 'site'",
		).Scan(&r.Spec, &r.Master, &r.Due, &fired, &r.Seeds); err != nil {
			t.Fatal(err)
		}
		r.Fired = !fired.IsZero()
		return r
	}
	want := row{Spec: long[:2*maxScheduleSpec], Master: long[:2*maxMaster], Due: slot.Add(1500 * time.Millisecond), Fired: true}
	if d := cmp.Diff(want, read()); d != "" {
		t.Errorf("claimed row (-want +got):\n%s", d)
	}
	if err := s.SetRunSeeds(ctx, "c", "site", slot.Add(1500*time.Millisecond), 42); err != nil {
		t.Fatal(err)
	}
	want.Seeds = sql.NullInt64{Int64: 42, Valid: true}
	if d := cmp.Diff(want, read()); d != "" {
		t.Errorf("row after SetRunSeeds (-want +got):\n%s", d)
	}
	// A slot never claimed: nothing to update, no error, no row.
	if err := s.SetRunSeeds(ctx, "c", "site", slot, 7); err != nil {
		t.Errorf("set seeds of an unclaimed slot: %v", err)
	}
	var rows int
	if err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM schedule_runs").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Errorf("%d rows, want 1", rows)
	}
}

func TestClaimRunRefusesLongKeys(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	for _, c := range []struct{ crawl, name string }{
		{strings.Repeat("c", maxCrawl+1), ""},
		{"c", strings.Repeat("n", maxScheduleName+1)},
	} {
		if _, err := s.ClaimRun(ctx, c.crawl, c.name, "@daily", slot, "m"); err == nil {
			t.Errorf("ClaimRun(%d-character crawl, %d-character name) did not fail", len(c.crawl), len(c.name))
		}
		if err := s.SetRunSeeds(ctx, c.crawl, c.name, slot, 1); err == nil {
			t.Errorf("SetRunSeeds(%d-character crawl, %d-character name) did not fail", len(c.crawl), len(c.name))
		}
	}
}

func TestLastRuns(t *testing.T) {
	ctx := t.Context()
	s := open(t)
	got, err := s.LastRuns(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || len(got) != 0 {
		t.Errorf("LastRuns with no runs = %#v, want an empty map", got)
	}
	for _, r := range []struct {
		crawl, name string
		due         time.Time
	}{
		{"c", "", slot},
		{"c", "", slot.Add(2 * time.Hour)},
		{"c", "", slot.Add(time.Hour)}, // claimed late: the latest slot still wins
		{"c", "site", slot.Add(-24 * time.Hour)},
		{"d", "", slot.Add(48 * time.Hour)},
	} {
		if _, err := s.ClaimRun(ctx, r.crawl, r.name, "@hourly", r.due, "m"); err != nil {
			t.Fatal(err)
		}
	}
	for crawl, want := range map[string]map[string]time.Time{
		"c": {"": slot.Add(2 * time.Hour), "site": slot.Add(-24 * time.Hour)},
		"d": {"": slot.Add(48 * time.Hour)},
		"e": {},
	} {
		got, err := s.LastRuns(ctx, crawl)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("LastRuns(%q) (-want +got):\n%s", crawl, d)
		}
		for name, due := range got {
			if due.Location() != time.UTC {
				t.Errorf("LastRuns(%q)[%q] in %v, want UTC", crawl, name, due.Location())
			}
		}
	}
}

// TestScheduleColumnLimits checks schedule.go's limits against the schema.
func TestScheduleColumnLimits(t *testing.T) {
	s := open(t)
	want := map[string]int64{"crawl": maxCrawl, "name": maxScheduleName, "spec": maxScheduleSpec, "master": maxMaster}
	got := map[string]int64{}
	err := s.query(t.Context(), "columns", `SELECT column_name, character_maximum_length FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'schedule_runs' AND character_maximum_length IS NOT NULL`,
		nil, func(r *sql.Rows) error {
			var c string
			var n int64
			if err := r.Scan(&c, &n); err != nil {
				return err
			}
			got[c] = n
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("schedule_runs string columns (-want +got):\n%s", d)
	}
}
