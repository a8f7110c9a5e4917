-- Rule files, rendering and item extraction: the items extracted from pages
-- (items), what a slave can do and which rules it runs (heartbeats), how a
-- page was fetched and which rule set matched it (pages), and the HTML
-- snapshot of a render failure (exceptions). The conventions of
-- 00001_initial.sql hold: InnoDB, utf8mb4_bin, DATETIME(3) in UTC, URLs never
-- indexed directly, column sizes mirrored by shared/store (limits.go).
--
-- items is not an event log but the latest state of each item: one row per
-- (crawl, rule set, item rule, URL), keyed by url_hash (as pages.url_hash),
-- so a re-fetch updates the row instead of adding one. The store writes it
-- with INSERT ... ON DUPLICATE KEY UPDATE, which replaces data, url,
-- slave_id, event_id, fetched_at and updated_at only when the incoming
-- (fetched_at, event_id) is newer than the stored one: a redelivered or
-- older event changes nothing. event_id is the stream entry that last wrote
-- the row; created_at and updated_at are set by the store, in UTC.
--
-- data is JSON: a native JSON column on MySQL 8; on MariaDB an alias of
-- LONGTEXT (utf8mb4_bin) with a CHECK (JSON_VALID(data)) constraint. The
-- store only writes JSON both accept (anything else is stored as a JSON
-- string), so the check never rejects a row.
--
-- The new columns of heartbeats, pages and exceptions are added at the end
-- of their tables with defaults, which MariaDB 10.3+ and MySQL 8.0.12+ do in
-- place (ALGORITHM=INSTANT) without rewriting the rows.

-- +goose Up
CREATE TABLE items (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    crawl       VARCHAR(64)     NOT NULL,
    rule        VARCHAR(128)    NOT NULL DEFAULT '', -- rule set name
    item        VARCHAR(128)    NOT NULL DEFAULT '', -- item rule name within the rule set
    url         VARCHAR(2048)   NOT NULL,
    url_hash    BINARY(8)       NOT NULL,            -- as pages.url_hash
    data        JSON            NOT NULL,
    slave_id    VARCHAR(128)    NOT NULL DEFAULT '',
    fetched_at  DATETIME(3)     NOT NULL,
    event_id    VARCHAR(41)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    created_at  DATETIME(3)     NOT NULL,
    updated_at  DATETIME(3)     NOT NULL,
    PRIMARY KEY (id),
    -- 64 + 128 + 128 characters of utf8mb4 plus 8 bytes: 1,288 bytes, inside
    -- InnoDB's 3,072-byte key limit.
    UNIQUE KEY uk_items_url (crawl, rule, item, url_hash),
    KEY ix_items_fetched (crawl, rule, item, fetched_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE heartbeats
    ADD COLUMN render         TINYINT(1)   NOT NULL DEFAULT 0,
    ADD COLUMN rules_version  VARCHAR(64)  NOT NULL DEFAULT '';

ALTER TABLE pages
    ADD COLUMN rendered  TINYINT(1)    NOT NULL DEFAULT 0,
    ADD COLUMN rule      VARCHAR(128)  NOT NULL DEFAULT '';

ALTER TABLE exceptions
    ADD COLUMN snapshot  VARCHAR(512)  NOT NULL DEFAULT '';

-- +goose Down
-- The table goes first (IF EXISTS) and the ALTERs, which cannot say IF
-- EXISTS in MySQL, last.
DROP TABLE IF EXISTS items;
ALTER TABLE exceptions
    DROP COLUMN snapshot;
ALTER TABLE pages
    DROP COLUMN rule,
    DROP COLUMN rendered;
ALTER TABLE heartbeats
    DROP COLUMN rules_version,
    DROP COLUMN render;
