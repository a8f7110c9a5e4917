package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/internal/harness/selfcert"
	"github.com/redcrawl/redcrawl/shared/config"
)

// unit is a parsed systemd unit file or drop-in: section -> key -> values
// in file order (a key may repeat).
type unit map[string]map[string][]string

// parseUnit reads a unit file the way systemd splits it: [Section] headers,
// KEY=VALUE lines, "#" and ";" comments, a trailing backslash continuing a
// line.
func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read unit: %v", err)
	}
	u := unit{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	lineNo, pending := 0, ""
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if pending == "" && (line == "" || line[0] == '#' || line[0] == ';') {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, pending = pending+line, ""
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: not a KEY=VALUE line in a section: %q", path, lineNo, line)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		u[section][key] = append(u[section][key], val)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan %s: %v", path, err)
	}
	return u
}

// last is the value that wins for a key set once (systemd: the last one).
func (u unit) last(section, key string) (string, bool) {
	v := u[section][key]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// env is the unit's Environment= assignments, later ones winning.
func (u unit) env(t *testing.T) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range u["Service"]["Environment"] {
		for _, kv := range strings.Fields(line) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("Environment=%s: %q is not NAME=VALUE", line, kv)
			}
			m[k] = v
		}
	}
	return m
}

// words is every value of a list-valued key, split on spaces.
func (u unit) words(section, key string) []string {
	var w []string
	for _, v := range u[section][key] {
		w = append(w, strings.Fields(v)...)
	}
	return w
}

func repoConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join("..", "config.yaml"))
	if err != nil {
		t.Fatalf("load the repository's config.yaml: %v", err)
	}
	return cfg
}

// masterDrainBound is how long a stopping master drains the event stream
// into MySQL (the constant in master/masterd/masterd.go, Master.Run).
const masterDrainBound = 30 * time.Second

// stopMargin is the least time a unit's TimeoutStopSec leaves past the
// program's own shutdown bound.
const stopMargin = 10 * time.Second

// TestUnitDirectives checks that every unit carries the sandbox and restart
// policy docs/deploy.md promises, and that its stop timeout outlasts the
// program's graceful shutdown.
func TestUnitDirectives(t *testing.T) {
	cfg := repoConfig(t)
	required := map[string]string{
		"Type":                     "exec",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": "2",
		"KillSignal":               "SIGTERM",
		"DynamicUser":              "yes",
		"ProtectSystem":            "strict",
		"ProtectHome":              "yes",
		"PrivateTmp":               "yes",
		"PrivateDevices":           "yes",
		"NoNewPrivileges":          "yes",
		"CapabilityBoundingSet":    "",
		"AmbientCapabilities":      "",
		"ProtectKernelTunables":    "yes",
		"ProtectKernelModules":     "yes",
		"ProtectKernelLogs":        "yes",
		"ProtectControlGroups":     "yes",
		"RestrictAddressFamilies":  "AF_INET AF_INET6 AF_UNIX",
		"RestrictNamespaces":       "yes",
		"RestrictSUIDSGID":         "yes",
		"LockPersonality":          "yes",
		"MemoryDenyWriteExecute":   "yes",
		"SystemCallArchitectures":  "native",
	}
	tests := []struct {
		file        string
		user        string
		execStart   string
		stopAtLeast time.Duration
		// credentials are the LoadCredential= IDs, each passed to the
		// program as the CRAWLER_ variable of a *_file key.
		credentials map[string]string
	}{
		{
			file:        "redcrawl-master.service",
			user:        "redcrawl-master",
			execStart:   "/usr/local/bin/redcrawl-master run --config /etc/redcrawl/config.yaml",
			stopAtLeast: masterDrainBound + stopMargin,
			credentials: map[string]string{
				"redis-password": "CRAWLER_REDIS_PASSWORD_FILE",
				"mysql-password": "CRAWLER_MYSQL_PASSWORD_FILE",
				"admin-token":    "CRAWLER_ADMIN_TOKEN_FILE",
			},
		},
		{
			file:        "redcrawl-slave@.service",
			user:        "redcrawl-slave",
			execStart:   "/usr/local/bin/redcrawl-slave run --config /etc/redcrawl/config.yaml --id %i",
			stopAtLeast: cfg.Slave.ShutdownTimeout + stopMargin,
			credentials: map[string]string{"redis-password": "CRAWLER_REDIS_PASSWORD_FILE"},
		},
		{
			// a slave of the work API: its token, and no Redis or MySQL
			// credential
			file:        "redcrawl-api-slave@.service",
			user:        "redcrawl-slave",
			execStart:   "/usr/local/bin/redcrawl-slave run --config /etc/redcrawl/config.yaml --id %i",
			stopAtLeast: cfg.Slave.ShutdownTimeout + stopMargin,
			credentials: map[string]string{"api-token": "CRAWLER_SLAVE_API_TOKEN_FILE"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			u := parseUnit(t, filepath.Join("systemd", tt.file))
			got := map[string]string{}
			for k := range required {
				if v, ok := u.last("Service", k); ok {
					got[k] = v
				}
			}
			if d := cmp.Diff(required, got); d != "" {
				t.Errorf("[Service] directives (-want +got):\n%s", d)
			}
			if v, _ := u.last("Service", "User"); v != tt.user {
				t.Errorf("User=%q, want %q (names the dynamic user)", v, tt.user)
			}
			if v, _ := u.last("Service", "ExecStart"); v != tt.execStart {
				t.Errorf("ExecStart=%q, want %q", v, tt.execStart)
			}
			filter := u["Service"]["SystemCallFilter"]
			if len(filter) == 0 || filter[0] != "@system-service" {
				t.Errorf("SystemCallFilter=%q, want @system-service first", filter)
			}
			stop, _ := u.last("Service", "TimeoutStopSec")
			d, err := time.ParseDuration(stop)
			if err != nil {
				t.Fatalf("TimeoutStopSec=%q: %v", stop, err)
			}
			if d < tt.stopAtLeast {
				t.Errorf("TimeoutStopSec=%v, want at least %v (the program's shutdown bound + %v)", d, tt.stopAtLeast, stopMargin)
			}
			if v, _ := u.last("Service", "RestartSec"); v == "" {
				t.Errorf("RestartSec is not set")
			}
			creds := map[string]string{}
			for _, lc := range u["Service"]["LoadCredential"] {
				id, src, ok := strings.Cut(lc, ":")
				if !ok || !strings.HasPrefix(src, "/etc/redcrawl/credentials/") {
					t.Errorf("LoadCredential=%s: want ID:/etc/redcrawl/credentials/...", lc)
				}
				creds[id] = ""
			}
			env := u.env(t)
			if len(creds) != len(tt.credentials) {
				t.Errorf("credentials %v, want exactly %v", creds, tt.credentials)
			}
			for id, name := range tt.credentials {
				if _, ok := creds[id]; !ok {
					t.Errorf("no LoadCredential=%s:...", id)
				}
				if env[name] != "%d/"+id {
					t.Errorf("Environment %s=%q, want %q", name, env[name], "%d/"+id)
				}
			}
		})
	}
}

// TestSlaveWritablePaths checks that the directories the deployment's
// config.yaml names (docs/deploy.md) are the ones the slave unit makes
// writable, and that those keys mean what the unit assumes: loading the
// repository's config.yaml with them set must succeed.
func TestSlaveWritablePaths(t *testing.T) {
	u := parseUnit(t, filepath.Join("systemd", "redcrawl-slave@.service"))
	writable := map[string]bool{}
	for _, d := range u.words("Service", "StateDirectory") {
		writable[filepath.Join("/var/lib", d)] = true
	}
	for _, d := range u.words("Service", "CacheDirectory") {
		writable[filepath.Join("/var/cache", strings.ReplaceAll(d, "%i", "pi1"))] = true
	}
	for _, d := range u.words("Service", "ReadWritePaths") {
		writable[d] = true
	}
	tmp := strings.ReplaceAll(strings.ReplaceAll(u.env(t)["TMPDIR"], "%C", "/var/cache"), "%i", "pi1")
	deployed := map[string]string{
		"CRAWLER_STORAGE_WARC_DIR":    "/var/lib/redcrawl/warc",
		"CRAWLER_RENDER_SNAPSHOT_DIR": "/var/lib/redcrawl/snapshots",
	}
	for name, dir := range deployed {
		if !writable[dir] {
			t.Errorf("%s=%s: the unit does not make it writable (writable: %v)", name, dir, writable)
		}
		t.Setenv(name, dir)
	}
	cfg := repoConfig(t)
	got := map[string]string{
		"storage.warc_dir":    cfg.Storage.WARCDir,
		"render.snapshot_dir": cfg.Render.SnapshotDir,
		"fetch.temp_dir":      cfg.Fetch.TempDir,
	}
	want := map[string]string{
		"storage.warc_dir":    "/var/lib/redcrawl/warc",
		"render.snapshot_dir": "/var/lib/redcrawl/snapshots",
		"fetch.temp_dir":      "", // "" = $TMPDIR, which the unit sets
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}
	if !writable[tmp] {
		t.Errorf("TMPDIR=%s (spilled bodies, fetch.temp_dir \"\") is not a writable directory of the unit (writable: %v)", tmp, writable)
	}
	for _, pre := range u["Service"]["ExecStartPre"] {
		// the cleanup at start may only touch the transient directory
		if !strings.Contains(pre, "%C/redcrawl/slave-%i") {
			t.Errorf("ExecStartPre=%s works outside the slave's cache directory", pre)
		}
	}
}

// TestUnitEnvironmentIsConfig loads the repository's config.yaml with the
// environment each unit (and the example env file) gives the program, so a
// misspelt CRAWLER_ variable in a unit fails here rather than on the host.
func TestUnitEnvironmentIsConfig(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("a-secret-of-at-least-16-chars\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	envFile := readEnvFile(t, filepath.Join("systemd", "slave.env.example"))
	apiEnvFile := readEnvFile(t, filepath.Join("systemd", "api-slave.env.example"))
	certs, err := selfcert.Make(t.TempDir(), "10.0.0.5")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file  string
		base  string // the unit a drop-in adds to
		extra map[string]string
		// creds are credential files by ID; others are the secret file
		creds map[string]string
	}{
		{file: "redcrawl-master.service"},
		{file: "redcrawl-slave@.service", extra: envFile},
		{file: "redcrawl-api-slave@.service", extra: apiEnvFile},
		{file: "master-api.conf", base: "redcrawl-master.service",
			extra: map[string]string{"CRAWLER_API_LISTEN": "10.0.0.5:8443", "CRAWLER_API_TLS_CERT": certs.ServerCert},
			creds: map[string]string{"api-tls-key": certs.ServerKey}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			env := map[string]string{}
			if tt.base != "" {
				env = parseUnit(t, filepath.Join("systemd", tt.base)).env(t)
			}
			for k, v := range parseUnit(t, filepath.Join("systemd", tt.file)).env(t) {
				env[k] = v
			}
			for k, v := range tt.extra {
				env[k] = v
			}
			for k, v := range env {
				if !strings.HasPrefix(k, "CRAWLER_") {
					continue
				}
				if id, ok := strings.CutPrefix(v, "%d/"); ok {
					v = secret // every other credential is the same test file
					if f, ok := tt.creds[id]; ok {
						v = f
					}
				}
				t.Setenv(k, v)
			}
			// a variable the config calls unknown is the failure this test
			// is for: the unit would not start on the host
			if _, err := config.Load(filepath.Join("..", "config.yaml")); err != nil {
				t.Fatalf("config.yaml with the unit's environment %v: %v", env, err)
			}
		})
	}
}

func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not NAME=VALUE", path, line)
		}
		m[k] = v
	}
	return m
}

var execStartRE = regexp.MustCompile(`(?m)^(ExecStart=)/usr/local/bin/redcrawl-(master|slave)\b`)

// installUnits copies the units to a fresh directory with ExecStart pointed
// at an executable that exists here (systemd-analyze checks that it does),
// adding the render drop-in for slave "render1".
func installUnits(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"redcrawl-master.service", "redcrawl-slave@.service", "redcrawl-api-slave@.service"} {
		b, err := os.ReadFile(filepath.Join("systemd", f))
		if err != nil {
			t.Fatal(err)
		}
		if !execStartRE.Match(b) {
			t.Fatalf("%s: no ExecStart=/usr/local/bin/redcrawl-...", f)
		}
		b = execStartRE.ReplaceAll(b, []byte("${1}"+self))
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []struct{ dir, file, as string }{
		{"redcrawl-slave@render1.service.d", "slave-render.conf", "render.conf"},
		// the master serving the work API
		{"redcrawl-master.service.d", "master-api.conf", "api.conf"},
	} {
		dropin := filepath.Join(dir, d.dir)
		if err := os.Mkdir(dropin, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join("systemd", d.file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dropin, d.as), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not found in PATH: the unit checks need it (Debian package systemd)")
	}
	return p
}

// runAnalyze runs systemd-analyze with the unit directory first in the
// search path (drop-ins included) and returns its exit error and stderr.
func runAnalyze(t *testing.T, bin, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	// the trailing ":" keeps the system's directories for network-online.target
	cmd.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":", "SYSTEMD_LOG_LEVEL=notice", "SYSTEMD_PAGER=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String() + stderr.String(), err
}

// TestUnitsVerify runs systemd-analyze verify on the master, a slave
// instance and a rendering slave instance (with slave-render.conf): any
// message, an unknown directive included, fails the test.
func TestUnitsVerify(t *testing.T) {
	bin := systemdAnalyze(t)
	dir := installUnits(t)
	for _, name := range []string{"redcrawl-master.service", "redcrawl-slave@pi1.service", "redcrawl-slave@render1.service", "redcrawl-api-slave@friend1.service"} {
		t.Run(name, func(t *testing.T) {
			out, err := runAnalyze(t, bin, dir, "verify", "--man=no", name)
			if err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("systemd-analyze verify %s: %v\n%s", name, err, out)
			}
		})
	}
}

// TestUnitsSecurity checks systemd's own exposure score of each unit
// (systemd-analyze security --offline, 0 = locked down, 10 = none; the
// master, a slave and a rendering slave score about 1.4 with systemd 252): a change
// that loosens the sandbox past the threshold fails. --threshold takes
// tenths: 20 is 2.0.
func TestUnitsSecurity(t *testing.T) {
	bin := systemdAnalyze(t)
	dir := installUnits(t)
	tests := []struct {
		name      string
		threshold string
	}{
		{"redcrawl-master.service", "20"},
		{"redcrawl-slave@pi1.service", "20"},
		{"redcrawl-slave@render1.service", "20"},
		{"redcrawl-api-slave@friend1.service", "20"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runAnalyze(t, bin, dir, "security", "--offline=true", "--no-pager", "--threshold="+tt.threshold, tt.name)
			if err != nil {
				t.Errorf("systemd-analyze security %s: exposure over %s (%v):\n%s", tt.name, tt.threshold, err, out)
			}
		})
	}
}
