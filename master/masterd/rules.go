package masterd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/ratelog"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// rulesStore is where the master publishes the rule set for the slaves.
type rulesStore interface {
	PutRules(ctx context.Context, version string, blob []byte) error
	frontier.Publisher
}

// rulesWatcher keeps the slaves' rule set in step with the rule files: it
// looks at the directory every poll interval, and when a file changed it
// validates the whole set and publishes the new version to Redis (the
// slaves switch to it by pub/sub, or at their next claim when they missed
// the message). An invalid edit is rejected: it is logged, recorded as a
// "rules" exception in MySQL, and the previous version stays in force.
type rulesWatcher struct {
	dir   string
	every time.Duration
	opt   rules.LoadOptions
	crawl string
	front rulesStore
	log   *slog.Logger
	rl    *ratelog.Logger

	stamp     string // fingerprint of the files' names, sizes and times last loaded
	published string // version in force
	lastErr   string // the rejected edit last reported

	mu    sync.Mutex // guards state, read by the admin server and the scheduler
	state rulesState
}

// rulesState is what the dashboard and the scheduler read of the rules.
type rulesState struct {
	set         *rules.Set // in force; nil before the first valid load
	loadedAt    time.Time
	lastErr     string // the last rejected edit, kept until a valid set loads
	lastErrAt   time.Time
	errorActive bool
}

// snapshot returns the rules state.
func (w *rulesWatcher) snapshot() rulesState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

func (w *rulesWatcher) run(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		w.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// check reloads the rule files if they changed and publishes a valid set.
func (w *rulesWatcher) check(ctx context.Context) {
	if _, err := os.Stat(w.dir); errors.Is(err, fs.ErrNotExist) {
		if w.lastErr != "missing" {
			w.log.Warn("no rule files: the directory does not exist", "dir", w.dir)
			w.lastErr = "missing"
		}
		return
	}
	stamp, err := dirStamp(w.dir)
	if err != nil {
		w.reject(ctx, fmt.Errorf("read rules directory: %w", err))
		return
	}
	if stamp == w.stamp && w.lastErr == "" && w.published != "" {
		return
	}
	set, err := rules.LoadDir(w.dir, w.opt)
	if err != nil {
		w.stamp = stamp
		w.reject(ctx, err)
		return
	}
	if set.Version != w.published {
		blob, err := set.Marshal()
		if err != nil {
			w.log.Error("encode rules", "err", err)
			return
		}
		if err := w.front.PutRules(ctx, set.Version, blob); err != nil {
			w.rl.Log(ctx, slog.LevelWarn, "rules-publish", "publish rules", "err", err)
			return // tried again at the next tick
		}
		w.log.Info("rules published", "version", ShortVersion(set.Version), "files", len(set.Files), "rule_sets", len(set.Sets))
		w.published = set.Version
		w.mu.Lock()
		w.state.set, w.state.loadedAt = set, time.Now()
		w.mu.Unlock()
	}
	w.mu.Lock()
	w.state.errorActive = false
	w.mu.Unlock()
	if w.lastErr != "" {
		w.log.Info("rule files valid again", "version", ShortVersion(set.Version))
	}
	w.stamp, w.lastErr = stamp, ""
}

// reject reports an invalid rule set once per distinct error.
func (w *rulesWatcher) reject(ctx context.Context, err error) {
	msg := err.Error()
	if msg == w.lastErr {
		return
	}
	w.lastErr = msg
	w.mu.Lock()
	w.state.lastErr, w.state.lastErrAt, w.state.errorActive = msg, time.Now(), true
	w.mu.Unlock()
	in := "none yet"
	if w.published != "" {
		in = ShortVersion(w.published)
	}
	w.log.Error("rule files rejected; the previous version stays in force", "version_in_force", in, "err", msg)
	ev, encErr := frontier.NewEvent(&events.Exception{Crawl: w.crawl, Kind: events.KindRules, Host: "",
		URL: w.dir, Message: msg, At: time.Now().UnixMilli()})
	if encErr == nil {
		if perr := w.front.Publish(ctx, []frontier.Event{ev}); perr != nil {
			w.rl.Log(ctx, slog.LevelWarn, "rules-publish", "record rules exception", "err", perr)
		}
	}
}

// dirStamp fingerprints the rule files of dir by name, size and time, so
// an unchanged directory costs one ReadDir per poll.
func dirStamp(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var lines []string
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || e.IsDir() {
			continue
		}
		lines = append(lines, e.Name()+"\t"+strconv.FormatInt(info.Size(), 10)+"\t"+
			strconv.FormatInt(info.ModTime().UnixNano(), 10))
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l + "\n"))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ShortVersion is the first 12 characters of a rule set version, for
// logs and tables.
func ShortVersion(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}

// LoadRules loads and validates the configured rule files (nil without
// rules.dir).
func LoadRules(cfg *config.Config) (*rules.Set, error) {
	if cfg.Rules.Dir == "" {
		return nil, nil
	}
	if _, err := os.Stat(cfg.Rules.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return rules.LoadDir(filepath.Clean(cfg.Rules.Dir), rules.LoadOptions{ProxyPools: cfg.ProxyPoolNames()})
}

// PublishRules loads the rule files of rules.dir and publishes them to the
// crawl's slaves now, as the master's rules watcher does when it starts. A
// command that starts its own slaves (master crawl) publishes them before
// any slave runs, so that no page is fetched before the rules are in
// force. It returns the version published ("" when there are no rule
// files).
func PublishRules(ctx context.Context, cfg *config.Config, front rulesStore) (string, error) {
	set, err := LoadRules(cfg)
	if err != nil {
		return "", fmt.Errorf("the rule files are invalid (bin/master rules check): %w", err)
	}
	if set == nil {
		return "", nil
	}
	blob, err := set.Marshal()
	if err != nil {
		return "", fmt.Errorf("encode rules: %w", err)
	}
	if err := front.PutRules(ctx, set.Version, blob); err != nil {
		return "", fmt.Errorf("publish rules: %w", err)
	}
	return set.Version, nil
}
