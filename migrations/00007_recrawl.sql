-- Incremental recrawls: what the last fetch of each page learned to
-- recognise it (page_validators), and how each fetch of a recrawl found its
-- page (pages.revisit).
--
-- page_validators holds one row per page URL the crawl recorded, updated by
-- every page event (INSERT ... ON DUPLICATE KEY UPDATE, the latest fetch
-- wins): its ETag and Last-Modified headers and its 64-bit content checksum
-- (as pages.checksum). A recrawl reads it in primary key order, a batch at
-- a time, to re-enqueue every recorded page with its validators; it is
-- cheaper than finding the latest pages row of each URL. depth is the
-- page's depth when first recorded, so a recrawled page's links keep their
-- depths (crawl.max_depth).
--
-- pages.revisit is "unchanged" (304 Not Modified, or a body whose checksum
-- is the stored one), "changed" (a page fetched before, with another body
-- or status) or "" (a page fetched for the first time, or without the
-- recrawl's validators: a retry). The per-run counts come from the pages
-- rows fetched since the run started (ix_pages_fetched).
--
-- The conventions of 00001_initial.sql hold; the new pages column is added
-- at the end with a default, in place.

-- +goose Up
CREATE TABLE page_validators (
    crawl          VARCHAR(64)     NOT NULL,
    url_hash       BINARY(8)       NOT NULL, -- as pages.url_hash
    url            VARCHAR(2048)   NOT NULL,
    depth          INT             NOT NULL DEFAULT 0,
    etag           VARCHAR(255)    NOT NULL DEFAULT '',
    last_modified  VARCHAR(64)     NOT NULL DEFAULT '',
    checksum       CHAR(16)        NOT NULL DEFAULT '',
    fetched_at     DATETIME(3)     NOT NULL,
    PRIMARY KEY (crawl, url_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

ALTER TABLE pages ADD COLUMN revisit VARCHAR(16) NOT NULL DEFAULT '';

-- +goose Down
DROP TABLE IF EXISTS page_validators;
ALTER TABLE pages DROP COLUMN revisit;
