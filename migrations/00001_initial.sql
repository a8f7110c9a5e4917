-- Initial redcrawl schema: one table per event type written by the master's
-- event sink (shared/store). Every event table carries the crawl name and the
-- Redis stream entry id with UNIQUE KEY (crawl, event_id), so an entry that
-- is redelivered (crash between the MySQL commit and the stream ack) is
-- ignored by INSERT IGNORE instead of being stored twice.
--
-- Conventions:
--   * InnoDB, utf8mb4 with binary collation: strings compare exactly as in Go
--     (URLs, slave ids and crawl names are case-sensitive).
--   * Times are DATETIME(3) in UTC (the store forces loc=UTC on the driver);
--     events carry unix milliseconds.
--   * URLs are VARCHAR(2048) and never indexed directly; pages.url_hash holds
--     the first 8 bytes of SHA-256 of the full URL as sent
--     (UNHEX(LEFT(SHA2(url, 256), 16)) for any URL stored untruncated).
--   * event_id is VARCHAR(41): a stream id is two uint64 joined by '-'.
--   * Column sizes are mirrored by shared/store (limits.go), which truncates
--     over-long values instead of failing a batch; keep them in sync (a test
--     checks).
--
-- MySQL commits DDL implicitly, so if a statement fails part-way the earlier
-- tables remain; the Down section uses IF EXISTS so it can clean up.

-- +goose Up
CREATE TABLE pages (
    id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    crawl         VARCHAR(64)     NOT NULL,
    event_id      VARCHAR(41)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    url           VARCHAR(2048)   NOT NULL,
    url_hash      BINARY(8)       NOT NULL,
    final_url     VARCHAR(2048)   NOT NULL DEFAULT '',
    status        SMALLINT        NOT NULL DEFAULT 0,
    content_type  VARCHAR(255)    NOT NULL DEFAULT '',
    bytes         BIGINT          NOT NULL DEFAULT 0,
    depth         INT             NOT NULL DEFAULT 0,
    attempt       INT             NOT NULL DEFAULT 0,
    links         INT             NOT NULL DEFAULT 0,
    duration_ms   INT             NOT NULL DEFAULT 0,
    fetched_at    DATETIME(3)     NOT NULL,
    slave_id      VARCHAR(128)    NOT NULL DEFAULT '',
    content_hash  CHAR(64)        NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    UNIQUE KEY uk_pages_event (crawl, event_id),
    KEY ix_pages_fetched (crawl, fetched_at),
    KEY ix_pages_url (crawl, url_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE exceptions (
    id         BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    crawl      VARCHAR(64)     NOT NULL,
    event_id   VARCHAR(41)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    kind       VARCHAR(32)     NOT NULL,
    url        VARCHAR(2048)   NOT NULL DEFAULT '',
    host       VARCHAR(255)    NOT NULL DEFAULT '',
    slave_id   VARCHAR(128)    NOT NULL DEFAULT '',
    attempt    INT             NOT NULL DEFAULT 0,
    status     SMALLINT        NOT NULL DEFAULT 0,
    message    TEXT            NOT NULL,
    at         DATETIME(3)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_exceptions_event (crawl, event_id),
    KEY ix_exceptions_at (crawl, at),
    KEY ix_exceptions_kind (crawl, kind, at),
    KEY ix_exceptions_host (crawl, host, at),
    KEY ix_exceptions_slave (crawl, slave_id, at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE slave_events (
    id        BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    crawl     VARCHAR(64)     NOT NULL,
    event_id  VARCHAR(41)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    slave_id  VARCHAR(128)    NOT NULL,
    kind      VARCHAR(16)     NOT NULL, -- join, leave, death (not an ENUM: a new kind must not fail inserts)
    host      VARCHAR(255)    NOT NULL DEFAULT '',
    at        DATETIME(3)     NOT NULL,
    detail    TEXT            NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_slave_events_event (crawl, event_id),
    KEY ix_slave_events_slave (crawl, slave_id, at),
    KEY ix_slave_events_at (crawl, at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE heartbeats (
    id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    crawl          VARCHAR(64)     NOT NULL,
    event_id       VARCHAR(41)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    slave_id       VARCHAR(128)    NOT NULL,
    host           VARCHAR(255)    NOT NULL DEFAULT '',
    pid            INT             NOT NULL DEFAULT 0,
    at             DATETIME(3)     NOT NULL,
    started_at     DATETIME(3)     NOT NULL,
    pages          BIGINT          NOT NULL DEFAULT 0,
    errors         BIGINT          NOT NULL DEFAULT 0,
    in_flight      BIGINT          NOT NULL DEFAULT 0,
    bytes          BIGINT          NOT NULL DEFAULT 0,
    rss            BIGINT          NOT NULL DEFAULT 0,
    pages_per_sec  DOUBLE          NOT NULL DEFAULT 0,
    concurrency    INT             NOT NULL DEFAULT 0,
    state          VARCHAR(16)     NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    UNIQUE KEY uk_heartbeats_event (crawl, event_id),
    KEY ix_heartbeats_slave (crawl, slave_id, at),
    KEY ix_heartbeats_at (crawl, at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE lost_tasks (
    id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    crawl        VARCHAR(64)     NOT NULL,
    event_id     VARCHAR(41)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    url          VARCHAR(2048)   NOT NULL,
    slave_id     VARCHAR(128)    NOT NULL DEFAULT '',
    leased_at    DATETIME(3)     NOT NULL,
    detected_at  DATETIME(3)     NOT NULL,
    attempt      INT             NOT NULL DEFAULT 0,
    reason       VARCHAR(32)     NOT NULL DEFAULT '',
    PRIMARY KEY (id),
    UNIQUE KEY uk_lost_tasks_event (crawl, event_id),
    KEY ix_lost_tasks_detected (crawl, detected_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS lost_tasks;
DROP TABLE IF EXISTS heartbeats;
DROP TABLE IF EXISTS slave_events;
DROP TABLE IF EXISTS exceptions;
DROP TABLE IF EXISTS pages;
