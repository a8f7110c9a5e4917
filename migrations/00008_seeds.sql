-- Recorded seeds: the seed URLs a crawl was given (bin/master seed, the
-- admin API's seed action), which every recrawl enqueues again. They used
-- to live in Redis (the set crawl:{name}:seeds, ~104 bytes of Redis per
-- seed); here they cost Redis nothing.
--
-- One row per crawl and canonical seed URL. url_hash is the first 16 bytes
-- of the URL's SHA-256 (store.SeedHash): the primary key, so recording a
-- seed again is an INSERT IGNORE that changes nothing, and a recrawl reads
-- the seeds a batch at a time in primary key order (one index range scan
-- per batch, whatever the crawl's size). 16 bytes and not pages.url_hash's
-- 8: a collision here would drop a seed from every recrawl without a
-- word, and at 16 bytes none happens before 2^64 seeds. added_at is when
-- the seed was first recorded. A canonical URL is at most 2048 bytes
-- (urlx.MaxURLLength), so url is never cut.
--
-- The conventions of 00001_initial.sql hold.

-- +goose Up
CREATE TABLE seeds (
    crawl     VARCHAR(64)     NOT NULL,
    url_hash  BINARY(16)      NOT NULL,
    url       VARCHAR(2048)   NOT NULL,
    added_at  DATETIME(3)     NOT NULL,
    PRIMARY KEY (crawl, url_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS seeds;
