package store

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Column limits, mirroring migrations/*.sql. VARCHAR and CHAR sizes count
// characters; TEXT counts bytes. TestColumnLimits checks them against the
// live schema.
const (
	maxCrawl       = 64
	maxEventID     = 110 // "<slave>/" (up to 65) + "18446744073709551615-18446744073709551615" (41): 00005_stream_tags.sql; a 64-character slave with a 4-digit shard ("<slave>~<shard>/", 70) leaves 40 for "<ms>-<seq>", ample with 13-digit ms
	maxURL         = 2048
	maxContentType = 255
	maxHost        = 255
	maxSlave       = 128
	maxContentHash = 64
	maxKind        = 32 // exceptions.kind
	maxSlaveKind   = 16 // slave_events.kind
	maxState       = 16
	maxReason      = 32
	maxTextBytes   = 65535 // TEXT
	maxCharset     = 64    // pages.charset
	maxWARC        = 512   // pages.warc
	maxProxy       = 512   // pages.proxy, proxy_events.proxy
	maxHandler     = 32    // pages.handler
	maxChecksum    = 16    // pages.checksum, duplicates.content_hash
	maxProxyState  = 16    // proxy_events.state
	maxRule        = 128   // items.rule, items.item, pages.rule
	maxRulesVer    = 64    // heartbeats.rules_version
	maxSnapshot    = 512   // exceptions.snapshot
	maxRobots      = 32    // pages.robots: "noindex,nofollow,noarchive"
	maxETag        = 255   // page_validators.etag
	maxLastMod     = 64    // page_validators.last_modified
	maxRevisit     = 16    // pages.revisit
)

// maxItemData is the most bytes of JSON the store writes to items.data
// (JSON: LONGTEXT on MariaDB). It keeps one item row inside a statement of
// maxBytesPerStmt, so an item can never exceed max_allowed_packet; a larger
// document is stored as a JSON string holding its first part (itemData).
const maxItemData = maxBytesPerStmt

// Integer column ranges.
const (
	minSmallInt = math.MinInt16
	maxSmallInt = math.MaxInt16
	minInt      = math.MinInt32
	maxInt      = math.MaxInt32
)

// DATETIME range, in unix milliseconds.
var (
	minDatetimeMS = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	maxDatetimeMS = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC).UnixMilli()
)

// chars makes s valid UTF-8 (invalid bytes become U+FFFD, which strict
// mode would otherwise reject) and cuts it to at most n characters.
func chars(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// text makes s valid UTF-8 and cuts it to at most n bytes on a character
// boundary.
func text(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// clamp limits v to [lo, hi].
func clamp[T int | int64](v T, lo, hi T) T {
	return min(max(v, lo), hi)
}

// smallint, integer clamp Go ints to SMALLINT and INT.
func smallint(v int) int64 { return int64(clamp(v, minSmallInt, maxSmallInt)) }
func integer(v int) int64  { return int64(clamp(v, minInt, maxInt)) }
func integer64(v int64) int64 {
	return clamp(v, minInt, maxInt)
}

// datetime turns unix milliseconds into a UTC time inside DATETIME's range.
func datetime(ms int64) time.Time {
	return time.UnixMilli(clamp(ms, minDatetimeMS, maxDatetimeMS)).UTC()
}

// finite replaces NaN and ±Inf, which MySQL cannot store, with 0.
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// unixMS is the inverse of datetime.
func unixMS(t time.Time) int64 { return t.UnixMilli() }
