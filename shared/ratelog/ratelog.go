// Package ratelog rate-limits repeated log lines, so an outage logs once a
// period instead of once per attempt.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Logger logs a message at most once per period per key and counts the
// ones it held back.
type Logger struct {
	log    *slog.Logger
	every  time.Duration
	mu     sync.Mutex
	last   map[string]time.Time
	held   map[string]int
	nowFor func() time.Time
}

// New returns a Logger that lets one line per key through every period.
func New(log *slog.Logger, every time.Duration) *Logger {
	return &Logger{log: log, every: every, last: map[string]time.Time{}, held: map[string]int{}, nowFor: time.Now}
}

// Log logs msg at level unless the same key was logged within the period;
// the line carries the number of lines held back since the last one.
func (l *Logger) Log(ctx context.Context, level slog.Level, key, msg string, args ...any) bool {
	l.mu.Lock()
	now := l.nowFor()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.every {
		l.held[key]++
		l.mu.Unlock()
		return false
	}
	held := l.held[key]
	l.last[key] = now
	delete(l.held, key)
	if len(l.last) > 10000 { // bound memory with many distinct keys
		for k, t := range l.last {
			if now.Sub(t) >= l.every {
				delete(l.last, k)
			}
		}
	}
	l.mu.Unlock()
	if held > 0 {
		args = append(args, "suppressed", held)
	}
	l.log.Log(ctx, level, msg, args...)
	return true
}

// Reset forgets a key, so that the next line for it (for example "redis is
// back") is logged at once.
func (l *Logger) Reset(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.last[key]
	delete(l.last, key)
	delete(l.held, key)
	return ok
}
