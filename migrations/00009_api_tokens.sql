-- The work API's tokens: one row per token an admin issued to a slave
-- (bin/master token issue). A slave on a machine you do not trust holds
-- its token and nothing else; the master takes the slave and the crawl
-- from the token, never from a request's body.
--
-- token_hash is the SHA-256 of the token: the token itself is printed once
-- and never stored, so a copy of this table opens nothing. revoked_at is
-- set by bin/master token revoke (a revoked token is refused within the
-- master's token cache's few seconds). max_in_flight and rate, when set,
-- replace api.max_in_flight and api.rate for this token.
--
-- The conventions of 00001_initial.sql hold.

-- +goose Up
CREATE TABLE api_tokens (
    id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
    crawl          VARCHAR(64)     NOT NULL,
    slave_id       VARCHAR(128)    NOT NULL,
    token_hash     BINARY(32)      NOT NULL,
    created_at     DATETIME(3)     NOT NULL,
    revoked_at     DATETIME(3)     NULL,
    max_in_flight  INT             NULL,
    rate           DOUBLE          NULL,
    PRIMARY KEY (id),
    UNIQUE KEY api_tokens_hash (token_hash),
    KEY api_tokens_slave (crawl, slave_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE IF EXISTS api_tokens;
