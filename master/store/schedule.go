package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
	"unicode/utf8"
)

// Column limits of schedule_runs (migrations/00004_schedules.sql).
const (
	maxScheduleName = 64  // schedule_runs.name: a rule set name
	maxScheduleSpec = 255 // schedule_runs.spec
	maxMaster       = 128 // schedule_runs.master
)

// ClaimRun records that the slot due of the schedule name of crawl fires,
// and reports whether this call claimed it: claimed is true only when the
// row was inserted here, false when any master (this one included) claimed
// the slot before. Concurrent claims of one slot yield exactly one true.
//
// name is "" for the crawl's own schedule, else the rule set's name; spec is
// the schedule's expression, kept for reference; master identifies the
// caller. due is stored to the millisecond in UTC, so callers must use the
// same instant for the same slot (cron slots are whole seconds). The run's
// seed count stays NULL until SetRunSeeds.
//
// crawl and name are parts of the key, so over-long values are refused
// rather than cut; spec and master are cut to their columns.
func (s *Store) ClaimRun(ctx context.Context, crawl, name, spec string, due time.Time, master string) (claimed bool, err error) {
	if err := checkRunKey(crawl, name); err != nil {
		return false, fmt.Errorf("claim run: %w", err)
	}
	res, err := s.DB.ExecContext(ctx,
		"INSERT IGNORE INTO schedule_runs (crawl, name, spec, due_at, fired_at, master) VALUES (?, ?, ?, ?, ?, ?)",
		crawl, name, chars(spec, maxScheduleSpec), runTime(due), time.Now().UTC(), chars(master, maxMaster))
	if err != nil {
		return false, fmt.Errorf("claim run %s/%s at %s: %w", crawl, name, due.UTC().Format(time.RFC3339), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim run %s/%s at %s: rows affected: %w", crawl, name, due.UTC().Format(time.RFC3339), err)
	}
	return n == 1, nil
}

// SetRunSeeds records how many seed URLs the run claimed for slot due
// re-enqueued. Setting it on a slot never claimed changes nothing.
func (s *Store) SetRunSeeds(ctx context.Context, crawl, name string, due time.Time, seeds int) error {
	if err := checkRunKey(crawl, name); err != nil {
		return fmt.Errorf("set run seeds: %w", err)
	}
	if _, err := s.DB.ExecContext(ctx,
		"UPDATE schedule_runs SET seeds = ? WHERE crawl = ? AND name = ? AND due_at = ?",
		integer(seeds), crawl, name, runTime(due)); err != nil {
		return fmt.Errorf("set run seeds %s/%s at %s: %w", crawl, name, due.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// LastRuns returns, for each schedule of crawl that was ever claimed, the
// latest claimed slot (due_at, in UTC), keyed by schedule name ("" = the
// crawl's own schedule). A claimed slot counts even while its seed count is
// unset. The map is empty, not nil, when nothing ran.
func (s *Store) LastRuns(ctx context.Context, crawl string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	err := s.query(ctx, "last runs",
		"SELECT name, MAX(due_at) FROM schedule_runs WHERE crawl = ? GROUP BY name", []any{crawl},
		func(r *sql.Rows) error {
			var name string
			var due time.Time
			if err := r.Scan(&name, &due); err != nil {
				return err
			}
			out[name] = due.UTC()
			return nil
		})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkRunKey refuses crawl and schedule names longer than their columns.
func checkRunKey(crawl, name string) error {
	if n := utf8.RuneCountInString(crawl); n > maxCrawl {
		return fmt.Errorf("crawl name of %d characters, at most %d", n, maxCrawl)
	}
	if n := utf8.RuneCountInString(name); n > maxScheduleName {
		return fmt.Errorf("schedule name %q: %d characters, at most %d", name, n, maxScheduleName)
	}
	return nil
}

// runTime is a slot as stored: UTC, inside DATETIME's range, to the
// millisecond (what DATETIME(3) keeps).
func runTime(t time.Time) time.Time {
	return datetime(t.UnixMilli())
}
