-- Records of the slave fetch pipeline: proxy state changes of a slave's
-- session pool (proxy_events), pages whose content was already seen in the
-- crawl (duplicates), and what the pipeline knows about a stored page (new
-- pages columns). The conventions of 00001_initial.sql hold: one row per
-- stream entry with UNIQUE KEY (crawl, event_id) for INSERT IGNORE, InnoDB,
-- utf8mb4_bin, DATETIME(3) in UTC, URLs never indexed directly, column sizes
-- mirrored by shared/store (limits.go).
--
-- Content checksums (duplicates.content_hash, pages.checksum) are a 64-bit
-- checksum as 16 lowercase hex digits; pages.content_hash stays the SHA-256.
--
-- The pages columns are added at the end of the table with defaults, which
-- MariaDB 10.3+ and MySQL 8.0.12+ do in place (ALGORITHM=INSTANT) without
-- rewriting the rows.

-- +goose Up
CREATE TABLE proxy_events (
    id        BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    crawl     VARCHAR(64)     NOT NULL,
    event_id  VARCHAR(41)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    slave_id  VARCHAR(128)    NOT NULL DEFAULT '',
    proxy     VARCHAR(512)    NOT NULL DEFAULT '', -- credentials redacted by the slave
    state     VARCHAR(16)     NOT NULL DEFAULT '', -- added, up, cooling, retired, removed (not an ENUM)
    reason    TEXT            NOT NULL,
    errors    INT             NOT NULL DEFAULT 0,
    uses      INT             NOT NULL DEFAULT 0,
    at        DATETIME(3)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_proxy_events_event (crawl, event_id),
    -- 64 + 512 characters of utf8mb4 plus the time: 2,311 bytes, inside
    -- InnoDB's 3,072-byte key limit (DYNAMIC rows, the default).
    KEY ix_proxy_events_proxy (crawl, proxy, at),
    KEY ix_proxy_events_at (crawl, at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE duplicates (
    id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    crawl         VARCHAR(64)     NOT NULL,
    event_id      VARCHAR(41)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    url           VARCHAR(2048)   NOT NULL,
    url_hash      BINARY(8)       NOT NULL, -- as pages.url_hash
    first_url     VARCHAR(2048)   NOT NULL DEFAULT '',
    content_hash  CHAR(16)        NOT NULL DEFAULT '',
    slave_id      VARCHAR(128)    NOT NULL DEFAULT '',
    at            DATETIME(3)     NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uk_duplicates_event (crawl, event_id),
    KEY ix_duplicates_hash (crawl, content_hash),
    KEY ix_duplicates_url (crawl, url_hash),
    KEY ix_duplicates_at (crawl, at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE pages
    ADD COLUMN charset   VARCHAR(64)  NOT NULL DEFAULT '',
    ADD COLUMN warc      VARCHAR(512) NOT NULL DEFAULT '',
    ADD COLUMN proxy     VARCHAR(512) NOT NULL DEFAULT '',
    ADD COLUMN handler   VARCHAR(32)  NOT NULL DEFAULT '',
    ADD COLUMN checksum  CHAR(16)     NOT NULL DEFAULT '';

-- +goose Down
-- The tables go first (IF EXISTS) and the ALTER, which cannot say IF EXISTS
-- in MySQL, last: a Down that failed part-way can simply be run again.
DROP TABLE IF EXISTS duplicates;
DROP TABLE IF EXISTS proxy_events;
ALTER TABLE pages
    DROP COLUMN checksum,
    DROP COLUMN handler,
    DROP COLUMN proxy,
    DROP COLUMN warc,
    DROP COLUMN charset;
