package session

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode"
)

// listFile is a watched list file (proxies or user agents): one entry a
// line, blank lines and lines starting with # ignored.
type listFile struct {
	path  string
	what  string // "proxy" or "user agent", for messages
	parse func(line string) error
	size  int64
	mtime time.Time
	lines []string // the entries in force
}

// maxListFile bounds how much of a list file is read.
const maxListFile = 16 << 20

// load reads the file if its size or modification time changed since the
// last look. It reports whether the entries changed. An invalid line is
// returned as an error naming file:line, and the previous entries stay in
// force; the file's stat is remembered so the same bad file is reported
// once, not at every poll.
func (f *listFile) load() (changed bool, err error) {
	st, err := os.Stat(f.path)
	if err != nil {
		return false, fmt.Errorf("stat %s file: %w", f.what, err)
	}
	if st.Size() == f.size && st.ModTime().Equal(f.mtime) && f.lines != nil {
		return false, nil
	}
	if st.Size() > maxListFile {
		return false, fmt.Errorf("read %s file %s: larger than %d bytes", f.what, f.path, maxListFile)
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return false, fmt.Errorf("read %s file: %w", f.what, err)
	}
	f.size, f.mtime = st.Size(), st.ModTime()
	lines := []string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxListFile)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := f.parse(line); err != nil {
			return false, &LineError{File: f.path, Line: n, Err: err}
		}
		lines = append(lines, line)
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read %s file %s: %w", f.what, f.path, err)
	}
	changed = f.lines == nil || !equalStrings(lines, f.lines)
	f.lines = lines
	return changed, nil
}

// LineError is an invalid line of a proxy or user agent file. It never
// contains the line itself (which may hold a password), only its position
// and the reason.
type LineError struct {
	File string
	Line int
	Err  error
}

// Error implements error.
func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

// Unwrap returns the reason.
func (e *LineError) Unwrap() error { return e.Err }

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkUserAgent refuses user agents that cannot be a header value.
func checkUserAgent(ua string) error {
	if strings.ContainsFunc(ua, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }) {
		return fmt.Errorf("user agent contains a control character")
	}
	return nil
}

// reloadFiles re-reads the proxy and user agent files if they changed and
// applies them.
func (p *Pool) reloadFiles(ctx context.Context) {
	p.fileMu.Lock()
	defer p.fileMu.Unlock()
	if f := p.proxyFile; f != nil {
		changed, err := f.load()
		if err != nil {
			p.logFileError(ctx, f, err)
		} else if changed {
			p.mu.Lock()
			err := p.setProxiesLocked(p.desiredProxies())
			p.mu.Unlock()
			if err != nil {
				p.log.Error("cannot apply proxy file, previous list kept", "file", f.path, "err", err)
			} else {
				p.log.Info("proxy file reloaded", "file", f.path, "proxies", len(f.lines))
			}
		}
	}
	if f := p.uaFile; f != nil {
		changed, err := f.load()
		if err != nil {
			p.logFileError(ctx, f, err)
		} else if changed {
			p.mu.Lock()
			p.setUserAgentsLocked(p.desiredUserAgents())
			p.mu.Unlock()
			p.log.Info("user agent file reloaded", "file", f.path, "user_agents", len(f.lines))
		}
	}
	p.flush()
}

func (p *Pool) logFileError(ctx context.Context, f *listFile, err error) {
	if le, ok := err.(*LineError); ok {
		p.log.Error("invalid line, previous list kept", "what", f.what, "at", fmt.Sprintf("%s:%d", le.File, le.Line), "err", le.Err)
		return
	}
	p.rlog.Log(ctx, slog.LevelWarn, "reload:"+f.path, "cannot reload list file, previous list kept", "what", f.what, "file", f.path, "err", err)
}

// desiredProxies is Options.Proxies followed by the proxy file's entries,
// without duplicates; or direct when neither lists any and there is no file.
func (p *Pool) desiredProxies() []proxySpec {
	var out []proxySpec
	seen := map[string]bool{}
	add := func(raw string) {
		sp, err := parseProxy(raw)
		if err != nil || seen[sp.key] { // validated before
			return
		}
		seen[sp.key] = true
		out = append(out, sp)
	}
	for _, raw := range p.opt.Proxies {
		add(raw)
	}
	if p.proxyFile != nil {
		for _, raw := range p.proxyFile.lines {
			add(raw)
		}
	} else if len(out) == 0 {
		add(directKey)
	}
	return out
}

// desiredUserAgents is Options.UserAgents followed by the file's, or
// DefaultUserAgent when both are empty.
func (p *Pool) desiredUserAgents() []string {
	var out []string
	seen := map[string]bool{}
	for _, list := range [][]string{p.opt.UserAgents, p.uaFileLines()} {
		for _, ua := range list {
			ua = strings.TrimSpace(ua)
			if ua != "" && !seen[ua] {
				seen[ua] = true
				out = append(out, ua)
			}
		}
	}
	if len(out) == 0 {
		out = []string{p.opt.DefaultUserAgent}
	}
	return out
}

func (p *Pool) uaFileLines() []string {
	if p.uaFile == nil {
		return nil
	}
	return p.uaFile.lines
}
