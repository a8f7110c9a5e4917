package ratelog

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestRateLimit(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), time.Minute)
	now := time.Unix(0, 0)
	l.nowFor = func() time.Time { return now }
	ctx := context.Background()
	tests := []struct {
		advance time.Duration
		key     string
		want    bool
	}{
		{0, "redis", true},
		{time.Second, "redis", false},
		{time.Second, "redis", false},
		{time.Second, "mysql", true},
		{time.Minute, "redis", true},
	}
	for i, tc := range tests {
		now = now.Add(tc.advance)
		if got := l.Log(ctx, slog.LevelWarn, tc.key, "down"); got != tc.want {
			t.Errorf("step %d: logged %v, want %v", i, got, tc.want)
		}
	}
	if !strings.Contains(buf.String(), "suppressed=2") {
		t.Errorf("want the held-back count in the log, got:\n%s", buf.String())
	}
	if !l.Reset("redis") || l.Reset("nothing") {
		t.Error("reset reports whether the key was known")
	}
}
