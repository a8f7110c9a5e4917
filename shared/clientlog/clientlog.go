// Package clientlog routes the log lines of the client libraries (go-redis,
// the MySQL driver) through slog, rate-limited per message like
// redcrawl's own (shared/ratelog): an outage logs a line a period, not
// the library's line per dial attempt.
//
// The libraries keep their logger in a global; a main installs one once
// (InstallRedis, store.InstallDriverLogger) with its own slog logger.
package clientlog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/ratelog"
)

// Every is how often one message of a library is let through.
const Every = 30 * time.Second

// Logger writes a library's lines to slog at warning level, each distinct
// message (its format, or its first words) at most once per period, with
// the count of those held back.
type Logger struct {
	rl  *ratelog.Logger
	lib string
}

// New returns a Logger for library lib ("redis", "mysql") that logs to log
// at most once per every per message.
func New(log *slog.Logger, lib string, every time.Duration) *Logger {
	return &Logger{rl: ratelog.New(log, every), lib: lib}
}

// Printf is go-redis's logging interface (redis.SetLogger): the format
// is the message's key.
func (l *Logger) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	l.rl.Log(ctx, slog.LevelWarn, l.lib+":"+format, l.lib+" client", "line", strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// Print is the MySQL driver's logging interface (mysql.SetLogger): the
// line's text up to its first colon is the message's key.
func (l *Logger) Print(v ...any) {
	line := strings.TrimSpace(fmt.Sprint(v...))
	key, _, _ := strings.Cut(line, ":")
	l.rl.Log(context.Background(), slog.LevelWarn, l.lib+":"+key, l.lib+" client", "line", line)
}

// InstallRedis routes go-redis's log lines to log, rate-limited: a main
// calls it once, before it opens a client.
func InstallRedis(log *slog.Logger) {
	redis.SetLogger(New(log, "redis", Every))
}
