-- What a page says about itself (README "Robots meta, X-Robots-Tag and
-- canonical"): the robots directives the crawler obeyed for it, from its
-- robots meta tags and X-Robots-Tag headers, as the restricting ones in a
-- fixed order ("noindex,nofollow,noarchive"; '' = none), and the URL its
-- <link rel="canonical"> or Link: rel="canonical" header names ('' = none).
-- A noindex page keeps its row (status, checksum, ...) but has no WARC
-- record and no items: `WHERE robots LIKE '%noindex%'` finds them.
--
-- Added at the end of the table with defaults: in place (ALGORITHM=INSTANT)
-- on MariaDB 10.3+ and MySQL 8.0.12+. Sizes mirrored in shared/store
-- (limits.go).

-- +goose Up
ALTER TABLE pages
    ADD COLUMN robots     VARCHAR(32)    NOT NULL DEFAULT '',
    ADD COLUMN canonical  VARCHAR(2048)  NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE pages
    DROP COLUMN canonical,
    DROP COLUMN robots;
