-- Event ids name their stream: every slave writes its events to a stream
-- of its own (its Redis user may write no other), so the id of a slave's
-- event is "<slave>/<ms>-<seq>" (a slave id is 1 to 64 of A-Z a-z 0-9 _ .
-- -), and a master event's id stays "<ms>-<seq>". Two streams can hand out
-- the same ms-seq; the prefix keeps UNIQUE KEY (crawl, event_id) true to
-- its word, so a redelivered event is still stored once and two events
-- are never taken for one. 41 + 65 = 106 characters; 110 leaves room.
-- Widening a VARCHAR within 255 bytes is an in-place change in InnoDB.

-- +goose Up
ALTER TABLE pages        MODIFY event_id VARCHAR(110) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE exceptions   MODIFY event_id VARCHAR(110) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE slave_events MODIFY event_id VARCHAR(110) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE heartbeats   MODIFY event_id VARCHAR(110) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE lost_tasks   MODIFY event_id VARCHAR(110) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE proxy_events MODIFY event_id VARCHAR(110) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE duplicates   MODIFY event_id VARCHAR(110) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE items        MODIFY event_id VARCHAR(110) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;

-- +goose Down
-- fails while a row holds a slave's (longer) event id
ALTER TABLE pages        MODIFY event_id VARCHAR(41) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE exceptions   MODIFY event_id VARCHAR(41) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE slave_events MODIFY event_id VARCHAR(41) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE heartbeats   MODIFY event_id VARCHAR(41) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE lost_tasks   MODIFY event_id VARCHAR(41) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE proxy_events MODIFY event_id VARCHAR(41) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE duplicates   MODIFY event_id VARCHAR(41) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
ALTER TABLE items        MODIFY event_id VARCHAR(41) CHARACTER SET ascii COLLATE ascii_bin NOT NULL;
