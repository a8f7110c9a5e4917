package config

import (
	"errors"
	"strings"
	"testing"
)

// hostileNames are names an attacker or a careless admin might give a
// crawl or a slave: Redis hash tags and glob characters, key separators,
// control characters, paths, unicode and percent-encoding.
var hostileNames = []string{
	"", "a{b", "a}b", "{a}", "a:b", "a*", "a?", "a[b]", "a b", "a\tb", "a\nb", "a\rb", "a\x00b",
	"a/b", "../a", "a\\b", "é", "a%2Fb", "a\u202eb", "a,b", "a;b", "a'b", `a"b`, "a$b", "a@b",
	strings.Repeat("a", 65), ".", "..",
}

func TestCrawlNameRejectsHostile(t *testing.T) {
	for _, name := range hostileNames {
		if name == "." || name == ".." {
			continue // in no path: crawl names only go into keys and columns
		}
		t.Run(strings.ToValidUTF8(name, "?"), func(t *testing.T) {
			c := Default()
			c.Crawl.Name = name
			err := c.Validate()
			if err == nil {
				t.Fatalf("crawl.name %q accepted", name)
			}
			if ce := asConfigError(t, err); ce.Key != "crawl.name" {
				t.Errorf("crawl.name %q refused under key %q, want crawl.name", name, ce.Key)
			}
		})
	}
}

func TestCheckSlaveID(t *testing.T) {
	for _, id := range hostileNames {
		t.Run("bad "+strings.ToValidUTF8(id, "?"), func(t *testing.T) {
			err := CheckSlaveID(id)
			if err == nil {
				t.Fatalf("slave id %q accepted", id)
			}
			ce := asConfigError(t, err)
			if ce.Key != "slave.id" {
				t.Errorf("slave id %q refused under key %q, want slave.id", id, ce.Key)
			}
			if ExitCode(err) != 2 {
				t.Errorf("exit code %d, want 2", ExitCode(err))
			}
		})
	}
	for _, id := range []string{"s1", "crawler-1-4242-00ff", "A.b_c-9", strings.Repeat("z", 64), "..a"} {
		t.Run("good "+id, func(t *testing.T) {
			if err := CheckSlaveID(id); err != nil {
				t.Errorf("slave id %q refused: %v", id, err)
			}
		})
	}
}

// TestLoggerOneLinePerRecord: whatever a logged URL, host, slave id or
// message holds, the logger of log.format (text or json) writes each
// record as exactly one line.
func TestLoggerOneLinePerRecord(t *testing.T) {
	hostile := []string{
		"http://a.test/x\nlevel=ERROR msg=forged", "a\r\nb", "a\tb", "\x1b[2J", "a\x00b", "\u2028\u2029",
		"a\u0085b", `"quoted" = \ back`, "bad \xff utf-8", strings.Repeat("long\n", 1000),
	}
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			c := Default()
			c.Log.Format = format
			c.Log.Level = "debug"
			var buf strings.Builder
			log := c.NewLogger(&buf)
			for _, v := range hostile {
				log.Info(v, "url", v, "host", v, "slave", v, v, "value as key")
				log.With("slave", v).Error("fetch failed", "err", errors.New(v), "message", []string{v})
			}
			lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
			if len(lines) != 2*len(hostile) {
				t.Fatalf("%d lines for %d records:\n%s", len(lines), 2*len(hostile), buf.String())
			}
			for i, l := range lines {
				// C0 controls and the Unicode line separators; the JSON
				// handler leaves C1 controls such as U+0085 raw, which
				// line-based tools do not split on.
				if strings.ContainsFunc(l, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' }) {
					t.Errorf("line %d holds a raw control character: %q", i, l)
				}
			}
		})
	}
}
