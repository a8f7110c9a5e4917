package clientlog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRateLimited: a library's repeated line is logged once a period, each
// distinct message on its own.
func TestRateLimited(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), "redis", time.Hour)
	for i := range 16 {
		l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v", 5, i)
	}
	l.Printf(context.Background(), "redis: other %s", "thing")
	m := New(slog.New(slog.NewTextHandler(&buf, nil)), "mysql", time.Hour)
	for range 3 {
		m.Print("packets.go:58: unexpected EOF")
	}
	out := buf.String()
	for _, c := range []struct {
		sub  string
		want int
	}{{"failed to dial", 1}, {"redis: other thing", 1}, {"unexpected EOF", 1}, {"level=WARN", 3}} {
		if n := strings.Count(out, c.sub); n != c.want {
			t.Errorf("%q: %d lines, want %d:\n%s", c.sub, n, c.want, out)
		}
	}
}
