package testutil

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestServerRestart: a Redis with an AOF, killed and restarted, serves on
// the same port with what it had written, under a new process.
func TestServerRestart(t *testing.T) {
	srv := StartRedis(t, nil, "--appendonly", "yes", "--appendfsync", "always")
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pid := srv.Pid()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if srv.Pid() == pid {
		t.Errorf("pid %d after the restart, the killed process's", pid)
	}
	if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Errorf("GET k after the restart: %q %v, want v", v, err)
	}
	srv.Kill()
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Error("PING answered after Kill")
	}
}
