package rules

// Loading: a directory of rule files read, parsed and built into a Set with
// its version.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileBytes caps one rule file.
const MaxFileBytes = 1 << 20

// LoadDir loads every *.yaml and *.yml file of dir (not its
// subdirectories), ignoring names that start with "." or "_" and README.
// On failure the error is Errors, every problem with file:line:col (files
// named as dir/name).
func LoadDir(dir string, opt LoadOptions) (*Set, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("load rules: %w", err)
	}
	files := map[string][]byte{}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !isRuleFile(name) {
			continue
		}
		p := filepath.Join(dir, name)
		data, err := readCapped(p)
		if err != nil {
			return nil, fmt.Errorf("load rules: %w", err)
		}
		files[name] = data
	}
	return build(dir, files, opt)
}

// Check validates dir as LoadDir does (for "master rules check DIR").
func Check(dir string, opt LoadOptions) error {
	_, err := LoadDir(dir, opt)
	return err
}

func isRuleFile(name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return false
	}
	ext := filepath.Ext(name)
	if ext != ".yaml" && ext != ".yml" {
		return false
	}
	return !strings.EqualFold(strings.TrimSuffix(name, ext), "README")
}

func readCapped(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("read %s: larger than %d bytes", p, MaxFileBytes)
	}
	return data, nil
}

// version hashes the sorted names and contents, each length-prefixed.
func version(names []string, files map[string][]byte) string {
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%d:%s\x00%d:", len(n), n, len(files[n]))
		h.Write(files[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// build parses every file and indexes the rule sets.
func build(dir string, files map[string][]byte, opt LoadOptions) (*Set, error) {
	s := &Set{raw: files, exact: map[string][]*RuleSet{}, wild: map[string][]*RuleSet{}}
	for n := range files {
		s.Files = append(s.Files, n)
	}
	sort.Strings(s.Files)
	s.Version = version(s.Files, files)

	pools := map[string]bool{"": true}
	for _, p := range opt.ProxyPools {
		pools[p] = true
	}
	var errs Errors
	type named struct {
		file string
		node *yaml.Node
	}
	names := map[string]named{}
	for i, name := range s.Files {
		disp := name
		if dir != "" {
			disp = filepath.Join(dir, name)
		}
		p := &fileParser{file: disp, pools: pools}
		rs, nameNode := p.parseFile(name, files[name])
		errs = append(errs, p.errs...)
		if rs == nil {
			continue
		}
		rs.order = i
		if prev, dup := names[rs.Name]; dup {
			p.errs = nil
			p.errorf(nameNode, "duplicate rule set name %q (also in %s)", rs.Name, prev.file)
			errs = append(errs, p.errs...)
			continue
		}
		names[rs.Name] = named{file: disp, node: nameNode}
		s.Sets = append(s.Sets, rs)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	for _, rs := range s.Sets {
		s.polite = s.polite || rs.Politeness.Overrides()
		if len(rs.Hosts) == 0 {
			s.noHost = append(s.noHost, rs)
			continue
		}
		seen := map[string]bool{}
		for _, h := range rs.Hosts {
			if seen[h] {
				continue
			}
			seen[h] = true
			if suf, ok := strings.CutPrefix(h, "*."); ok {
				s.wild[suf] = append(s.wild[suf], rs)
			} else {
				s.exact[h] = append(s.exact[h], rs)
			}
		}
	}
	byRank := func(list []*RuleSet) {
		sort.SliceStable(list, func(i, j int) bool {
			if list[i].Priority != list[j].Priority {
				return list[i].Priority > list[j].Priority
			}
			return list[i].order < list[j].order
		})
	}
	for _, l := range s.exact {
		byRank(l)
	}
	for _, l := range s.wild {
		byRank(l)
	}
	byRank(s.noHost)
	return s, nil
}
