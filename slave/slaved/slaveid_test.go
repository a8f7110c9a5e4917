package slaved

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/shared/config"
)

func TestNewRefusesHostileSlaveID(t *testing.T) {
	for _, id := range []string{"a{b}", "a:b", "a*", "a\nb", "a/b", "..", strings.Repeat("x", 65), "é"} {
		t.Run(strings.ToValidUTF8(id, "?"), func(t *testing.T) {
			cfg := config.Default()
			_, err := New(&cfg, Options{ID: id})
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Key != "slave.id" {
				t.Fatalf("New with id %q: %v, want a config error naming slave.id", id, err)
			}
		})
	}
}

func TestDefaultID(t *testing.T) {
	tests := []struct {
		host string
		want string
	}{
		{"crawler-1", "crawler-1-42-00ff"},
		{"", "slave-42-00ff"},
		{"web{1}:x*\n", "web_1__x__-42-00ff"},
		{"hôte", "h_te-42-00ff"},
		{strings.Repeat("h", 80), strings.Repeat("h", 64-len("-42-00ff")) + "-42-00ff"},
	}
	for _, tt := range tests {
		got := defaultID(tt.host, 42, 0xff)
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("defaultID(%q) (-want +got):\n%s", tt.host, d)
		}
		if err := config.CheckSlaveID(got); err != nil {
			t.Errorf("defaultID(%q) = %q is not a valid id: %v", tt.host, got, err)
		}
	}
}
