-- Scheduled recrawls: one row per fired slot of a recrawl schedule, so that
-- each slot is fired once across master restarts and concurrent masters.
-- The conventions of 00001_initial.sql hold: InnoDB, utf8mb4_bin, DATETIME(3)
-- in UTC, column sizes mirrored by shared/store (limits.go, schedule.go).
--
-- A master claims a slot with INSERT IGNORE on UNIQUE KEY (crawl, name,
-- due_at): the master whose insert adds the row fires the slot, every other
-- one finds it taken. name is "" for the crawl's own schedule
-- (crawl.schedule) and the rule set name for a rule file's schedule. due_at
-- is the scheduled slot (not when it fired), so every master computes the
-- same key; fired_at is when the row was claimed; master is the claiming
-- master's id; seeds is the number of seed URLs re-enqueued, NULL until the
-- re-seeding finished.

-- +goose Up
CREATE TABLE schedule_runs (
    id        BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    crawl     VARCHAR(64)     NOT NULL,
    name      VARCHAR(64)     NOT NULL DEFAULT '', -- "" = the crawl's schedule; else the rule set
    spec      VARCHAR(255)    NOT NULL DEFAULT '', -- the cron expression or descriptor in force
    due_at    DATETIME(3)     NOT NULL,
    fired_at  DATETIME(3)     NOT NULL,
    master    VARCHAR(128)    NOT NULL DEFAULT '',
    seeds     INT             NULL DEFAULT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_schedule_runs_due (crawl, name, due_at),
    KEY ix_schedule_runs_fired (crawl, name, fired_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS schedule_runs;
