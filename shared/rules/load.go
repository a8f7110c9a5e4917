package rules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/extract"
	"github.com/redcrawl/redcrawl/shared/urlx"
	"go.yaml.in/yaml/v3"
	"golang.org/x/net/idna"
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

// wire is the distributed form of a Set.
type wire struct {
	Version string     `json:"version"`
	Files   []wireFile `json:"files"`
}

type wireFile struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// Marshal encodes the set's files for distribution (JSON: version and
// each file's name and raw contents).
func (s *Set) Marshal() ([]byte, error) {
	w := wire{Version: s.Version}
	for _, name := range s.Files {
		w.Files = append(w.Files, wireFile{Name: name, Data: s.raw[name]})
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("marshal rules: %w", err)
	}
	return b, nil
}

// Unmarshal rebuilds a Set from Marshal's output, validating the files
// exactly as LoadDir does; the Version is the same as the sender's.
func Unmarshal(b []byte, opt LoadOptions) (*Set, error) {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("unmarshal rules: %w", err)
	}
	files := map[string][]byte{}
	for _, f := range w.Files {
		if f.Name != filepath.Base(f.Name) || !isRuleFile(f.Name) {
			return nil, fmt.Errorf("unmarshal rules: bad file name %q", f.Name)
		}
		if _, dup := files[f.Name]; dup {
			return nil, fmt.Errorf("unmarshal rules: file %q twice", f.Name)
		}
		files[f.Name] = f.Data
	}
	s, err := build("", files, opt)
	if err != nil {
		return nil, err
	}
	if w.Version != "" && w.Version != s.Version {
		return nil, fmt.Errorf("unmarshal rules: version %s does not match the files (%s)", w.Version, s.Version)
	}
	return s, nil
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

// fileParser walks one file's YAML nodes, collecting errors.
type fileParser struct {
	file  string
	pools map[string]bool
	errs  Errors
	keyOf map[*yaml.Node]string // value node -> its key, for type errors
}

// typeErrorf reports a value of the wrong type, naming its key.
func (p *fileParser) typeErrorf(n *yaml.Node, format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	if k, ok := p.keyOf[n]; ok {
		msg = k + ": " + msg
	}
	p.errorf(n, "%s", msg)
}

func (p *fileParser) errorf(n *yaml.Node, format string, a ...any) {
	e := &Error{File: p.file, Msg: fmt.Sprintf(format, a...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
	}
	p.errs = append(p.errs, e)
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseFile parses one file; the rule set is nil when the file is not a
// mapping at all. nameNode positions duplicate-name errors.
func (p *fileParser) parseFile(name string, data []byte) (rs *RuleSet, nameNode *yaml.Node) {
	defer func() {
		if r := recover(); r != nil {
			p.errorf(nil, "internal error parsing the file: %v", r)
			rs = nil
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			p.errs = append(p.errs, &Error{File: p.file, Line: 1, Msg: "empty rule file"})
		} else {
			p.yamlError(err)
		}
		return nil, nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			p.yamlError(err)
		} else {
			p.errorf(&extra, "more than one YAML document in a rule file")
		}
		return nil, nil
	}
	if len(doc.Content) == 0 {
		p.errs = append(p.errs, &Error{File: p.file, Line: 1, Msg: "empty rule file"})
		return nil, nil
	}
	root := doc.Content[0]
	if p.noAliases(root) {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		p.errorf(root, "a rule file is a mapping of keys (name, hosts, ...), got %s", describe(root))
		return nil, nil
	}
	rs = &RuleSet{File: name, Name: strings.TrimSuffix(name, filepath.Ext(name))}
	nameNode = root
	var (
		allow, deny []string
		maxDepth    int
	)
	for _, kv := range p.mapping(root, "rule file", topKeys) {
		v := kv.v
		switch kv.key {
		case "name":
			nameNode = v
			if s, ok := p.str(v); ok {
				rs.Name = s
			}
		case "hosts":
			for _, n := range p.seq(v) {
				if h, ok := p.host(n); ok {
					rs.Hosts = append(rs.Hosts, h)
				}
			}
		case "urls":
			rs.URLs, rs.urls = p.regexes(v)
		case "priority":
			rs.Priority, _ = p.integer(v)
		case "scope":
			for _, kv := range p.mapping(v, "scope", scopeKeys) {
				switch kv.key {
				case "allow":
					rs.Scope.Allow, _ = p.regexes(kv.v)
					allow = rs.Scope.Allow
				case "deny":
					rs.Scope.Deny, _ = p.regexes(kv.v)
					deny = rs.Scope.Deny
				case "max_depth":
					if d, ok := p.integer(kv.v); ok {
						if d < 0 {
							p.errorf(kv.v, "max_depth %d must be >= 0 (0 = unlimited)", d)
						} else {
							rs.Scope.MaxDepth, maxDepth = d, d
						}
					}
				}
			}
		case "strategy":
			if s, ok := p.str(v); ok {
				if s != "bfs" && s != "dfs" {
					p.errorf(v, "unknown strategy %q (want bfs or dfs)", s)
				} else {
					rs.Strategy = s
				}
			}
		case "sitemaps":
			if s, ok := p.str(v); ok {
				if s != "robots" && s != "seed" && s != "off" {
					p.errorf(v, "unknown sitemaps mode %q (want robots, seed or off)", s)
				} else {
					rs.Sitemaps = s
				}
			}
		case "politeness":
			p.politeness(v, &rs.Politeness)
		case "session":
			p.session(v, &rs.Session)
		case "render":
			for _, n := range p.seq(v) {
				if r := p.render(n); r != nil {
					rs.Render = append(rs.Render, r)
				}
			}
		case "items":
			seen := map[string]bool{}
			for _, n := range p.seq(v) {
				it, name, nn := p.item(n)
				if name != "" && seen[name] {
					p.errorf(nn, "duplicate item name %q", name)
					continue
				}
				seen[name] = true
				if it != nil {
					rs.Items = append(rs.Items, it)
				}
			}
		case "schedule":
			if s, ok := p.str(v); ok {
				sched, err := ParseSchedule(s)
				if err != nil {
					p.errorf(v, "%v", err)
				} else {
					rs.Schedule, rs.schedule = s, sched
				}
			}
		}
	}
	if !validName(rs.Name) {
		p.errorf(nameNode, "rule set name %q: want 1 to 64 of A-Z a-z 0-9 _ . - (set name:)", rs.Name)
	}
	sc, err := urlx.NewScope(nil, allow, deny, maxDepth)
	if err != nil { // the regexes were checked above
		p.errorf(root, "scope: %v", err)
	}
	rs.scope = sc
	sort.SliceStable(p.errs, func(i, j int) bool {
		a, b := p.errs[i], p.errs[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	if len(p.errs) > 0 {
		return nil, nameNode
	}
	return rs, nameNode
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func validName(s string) bool { return nameRE.MatchString(s) }

// yamlError turns a parser error ("yaml: line 3: ...") into an Error.
func (p *fileParser) yamlError(err error) {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		p.errs = append(p.errs, &Error{File: p.file, Line: line, Msg: "yaml: " + m[2]})
		return
	}
	p.errs = append(p.errs, &Error{File: p.file, Msg: msg})
}

// noAliases reports (and returns true) when the document uses an alias.
func (p *fileParser) noAliases(n *yaml.Node) bool {
	found := false
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.AliasNode {
			p.errorf(n, "aliases (*%s) are not supported in rule files", n.Value)
			found = true
			return
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return found
}

var (
	topKeys        = []string{"name", "hosts", "urls", "priority", "scope", "strategy", "politeness", "session", "render", "items", "schedule", "sitemaps"}
	scopeKeys      = []string{"allow", "deny", "max_depth"}
	politenessKeys = []string{"delay", "jitter", "concurrency"}
	sessionKeys    = []string{"proxies", "proxy_pool", "cookies"}
	renderKeys     = []string{"match", "wait_selector", "wait_network_idle", "timeout", "scroll", "click", "block", "maybe_dynamic"}
	clickKeys      = []string{"selector", "times"}
	maybeKeys      = []string{"match", "min_links"}
	itemKeys       = []string{"name", "match", "fields"}
	fieldKeys      = []string{"name", "css", "xpath", "regex", "json", "attr", "list", "required", "type", "transform"}
	blockTypes     = []string{"image", "font", "media", "stylesheet"}
)

type keyValue struct {
	key  string
	k, v *yaml.Node
}

// mapping returns the known pairs of a mapping node, reporting a node that
// is not a mapping, unknown keys (with a suggestion) and duplicates.
func (p *fileParser) mapping(n *yaml.Node, what string, known []string) []keyValue {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s: want a mapping, got %s", what, describe(n))
		return nil
	}
	var out []keyValue
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, "%s: a key must be a string, got %s", what, describe(k))
			continue
		}
		key := k.Value
		if !contains(known, key) {
			p.errorf(k, "unknown key %q in %s%s", key, what, didYouMean(key, known))
			continue
		}
		if seen[key] {
			p.errorf(k, "duplicate key %q in %s", key, what)
			continue
		}
		seen[key] = true
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			p.errorf(v, "%s: missing value", key)
			continue
		}
		if p.keyOf == nil {
			p.keyOf = map[*yaml.Node]string{}
		}
		p.keyOf[v] = key
		out = append(out, keyValue{key: key, k: k, v: v})
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// describe names a node's kind for errors.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		}
		return fmt.Sprintf("the string %q", n.Value)
	}
	return "an alias"
}

func (p *fileParser) seq(n *yaml.Node) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		p.typeErrorf(n, "want a list, got %s", describe(n))
		return nil
	}
	return n.Content
}

func (p *fileParser) str(n *yaml.Node) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.typeErrorf(n, "want a string, got %s", describe(n))
		return "", false
	}
	return n.Value, true
}

func (p *fileParser) integer(n *yaml.Node) (int, bool) {
	var i int
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
		p.typeErrorf(n, "want an integer, got %s", describe(n))
		return 0, false
	}
	return i, true
}

func (p *fileParser) boolean(n *yaml.Node) (bool, bool) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
		p.typeErrorf(n, "want true or false, got %s", describe(n))
		return false, false
	}
	return b, true
}

func (p *fileParser) number(n *yaml.Node) (float64, bool) {
	var f float64
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil {
		p.typeErrorf(n, "want a number, got %s", describe(n))
		return 0, false
	}
	return f, true
}

// regexes parses a list of RE2 regexes; each error points at its entry.
func (p *fileParser) regexes(n *yaml.Node) ([]string, []*regexp.Regexp) {
	var srcs []string
	var res []*regexp.Regexp
	for _, e := range p.seq(n) {
		s, ok := p.str(e)
		if !ok {
			continue
		}
		if s == "" {
			p.errorf(e, "empty regex would match every url")
			continue
		}
		re, err := regexp.Compile(s)
		if err != nil {
			p.errorf(e, "bad regex: %v", err)
			continue
		}
		srcs = append(srcs, s)
		res = append(res, re)
	}
	return srcs, res
}

// host canonicalizes a hosts entry: lower case ASCII (IDNs to punycode),
// no port or path, "*." only as a prefix.
func (p *fileParser) host(n *yaml.Node) (string, bool) {
	s, ok := p.str(n)
	if !ok {
		return "", false
	}
	name, wild := strings.CutPrefix(strings.TrimSpace(s), "*.")
	name = strings.TrimSuffix(name, ".")
	if name == "" || strings.ContainsAny(name, "/:?#@*[]\\ ") {
		p.errorf(n, "host %q: want a bare host name such as example.com or *.example.com", s)
		return "", false
	}
	a, err := idna.Lookup.ToASCII(strings.ToLower(name))
	if err != nil {
		p.errorf(n, "host %q: %v", s, err)
		return "", false
	}
	if wild {
		return "*." + a, true
	}
	return a, true
}

func (p *fileParser) duration(n *yaml.Node) (d time.Duration, ok bool) {
	s, ok := p.str(n)
	if !ok {
		return 0, false
	}
	v, err := parseDuration(s)
	if err != nil {
		p.errorf(n, "%v", err)
		return 0, false
	}
	return v, true
}

func (p *fileParser) politeness(n *yaml.Node, pol *Politeness) {
	for _, kv := range p.mapping(n, "politeness", politenessKeys) {
		switch kv.key {
		case "delay":
			if d, ok := p.duration(kv.v); ok {
				pol.Delay = &d
			}
		case "jitter":
			if f, ok := p.number(kv.v); ok {
				if f < 0 || f > 10 {
					p.errorf(kv.v, "jitter %v must be between 0 and 10", f)
				} else {
					pol.Jitter = &f
				}
			}
		case "concurrency":
			if c, ok := p.integer(kv.v); ok {
				if c < 1 {
					p.errorf(kv.v, "concurrency %d must be >= 1", c)
				} else {
					pol.Concurrency = &c
				}
			}
		}
	}
}

func (p *fileParser) session(n *yaml.Node, s *Session) {
	for _, kv := range p.mapping(n, "session", sessionKeys) {
		switch kv.key {
		case "proxies":
			if b, ok := p.boolean(kv.v); ok {
				s.Proxies = &b
			}
		case "cookies":
			if b, ok := p.boolean(kv.v); ok {
				s.Cookies = &b
			}
		case "proxy_pool":
			if v, ok := p.str(kv.v); ok {
				if !p.pools[v] {
					known := make([]string, 0, len(p.pools))
					for k := range p.pools {
						if k != "" {
							known = append(known, k)
						}
					}
					sort.Strings(known)
					p.errorf(kv.v, "unknown proxy pool %q (known: %s)%s", v, strings.Join(known, ", "), didYouMean(v, known))
				} else {
					s.ProxyPool = v
				}
			}
		}
	}
}

func (p *fileParser) render(n *yaml.Node) *Render {
	r := &Render{Timeout: DefaultRenderTimeout}
	before := len(p.errs)
	for _, kv := range p.mapping(n, "render rule", renderKeys) {
		v := kv.v
		switch kv.key {
		case "match":
			r.Match, r.match = p.regexes(v)
		case "wait_selector":
			if s, ok := p.str(v); ok && p.css(v, s) {
				r.WaitSelector = s
			}
		case "wait_network_idle":
			r.WaitNetworkIdle, _ = p.boolean(v)
		case "timeout":
			if d, ok := p.duration(v); ok {
				if d == 0 {
					p.errorf(v, "timeout must be > 0")
				}
				r.Timeout = d
			}
		case "scroll":
			if i, ok := p.integer(v); ok {
				if i < 0 {
					p.errorf(v, "scroll %d must be >= 0", i)
				}
				r.Scroll = i
			}
		case "click":
			c := &Click{Times: 1}
			for _, kv := range p.mapping(v, "click", clickKeys) {
				switch kv.key {
				case "selector":
					if s, ok := p.str(kv.v); ok && p.css(kv.v, s) {
						c.Selector = s
					}
				case "times":
					if i, ok := p.integer(kv.v); ok {
						if i < 1 {
							p.errorf(kv.v, "times %d must be >= 1", i)
						}
						c.Times = i
					}
				}
			}
			if c.Selector == "" && v.Kind == yaml.MappingNode && len(p.errs) == before {
				p.errorf(v, "click: missing selector")
			}
			r.Click = c
		case "block":
			for _, e := range p.seq(v) {
				if s, ok := p.str(e); ok {
					if !contains(blockTypes, s) {
						p.errorf(e, "unknown resource type %q (want one of %s)%s", s, strings.Join(blockTypes, ", "), didYouMean(s, blockTypes))
						continue
					}
					r.Block = append(r.Block, s)
				}
			}
		case "maybe_dynamic":
			md := &MaybeDynamic{}
			for _, kv := range p.mapping(v, "maybe_dynamic", maybeKeys) {
				switch kv.key {
				case "match":
					md.Match, md.match = p.regexes(kv.v)
				case "min_links":
					if i, ok := p.integer(kv.v); ok {
						if i < 1 {
							p.errorf(kv.v, "min_links %d must be >= 1", i)
						}
						md.MinLinks = i
					}
				}
			}
			if len(p.errs) == before && (len(md.Match) == 0 || md.MinLinks == 0) && v.Kind == yaml.MappingNode {
				p.errorf(v, "maybe_dynamic needs match and min_links")
			}
			r.MaybeDynamic = md
		}
	}
	if len(p.errs) == before && n.Kind == yaml.MappingNode && len(r.Match) == 0 && r.MaybeDynamic == nil {
		p.errorf(n, "render rule: want match (URLs always rendered) or maybe_dynamic")
	}
	if len(p.errs) > before {
		return nil
	}
	return r
}

// css validates a selector with cascadia (the engine of goquery and colly).
func (p *fileParser) css(n *yaml.Node, s string) bool {
	if _, err := extract.Compile([]extract.Field{{Name: "selector", CSS: s}}); err != nil {
		var ce *extract.CompileError
		if errors.As(err, &ce) {
			err = ce.Err
		}
		p.errorf(n, "bad css selector: %v", err)
		return false
	}
	return true
}

// item parses one item rule and compiles its fields; it returns the name
// and its node, for duplicate errors, even when the item has errors.
func (p *fileParser) item(n *yaml.Node) (*ItemRule, string, *yaml.Node) {
	it, nameNode := p.itemRule(n)
	name := ""
	if nameNode != n && nameNode != nil && nameNode.Kind == yaml.ScalarNode {
		name = nameNode.Value
	}
	return it, name, nameNode
}

func (p *fileParser) itemRule(n *yaml.Node) (*ItemRule, *yaml.Node) {
	it := &ItemRule{}
	before := len(p.errs)
	nameNode := n
	var fieldsNode *yaml.Node
	for _, kv := range p.mapping(n, "item", itemKeys) {
		switch kv.key {
		case "name":
			nameNode = kv.v
			it.Name, _ = p.str(kv.v)
		case "match":
			it.Match, it.match = p.regexes(kv.v)
		case "fields":
			fieldsNode = kv.v
		}
	}
	if n.Kind != yaml.MappingNode {
		return nil, nil
	}
	if it.Name == "" && len(p.errs) == before {
		p.errorf(nameNode, "item: missing name")
	}
	if fieldsNode == nil {
		if len(p.errs) == before {
			p.errorf(n, "item %q: missing fields", it.Name)
		}
		return nil, nameNode
	}
	// Parse each field; compile the ones without YAML errors, mapping
	// extract's errors back to the key's node.
	type parsed struct {
		f    extract.Field
		pos  map[string]*yaml.Node
		orig int
	}
	var good []parsed
	for i, fn := range p.seq(fieldsNode) {
		fb := len(p.errs)
		f, pos := p.field(fn)
		if len(p.errs) == fb {
			good = append(good, parsed{f, pos, i})
			it.Fields = append(it.Fields, f)
		}
	}
	node := func(i int, key string) (*yaml.Node, int) { return posOf(good[i].pos, key), good[i].orig }
	if len(it.Fields) == 0 && len(p.errs) == before {
		p.errorf(fieldsNode, "item %q: no fields", it.Name)
	}
	if len(p.errs) > before {
		// Still report selector errors of the good fields.
		fs := make([]extract.Field, len(good))
		for i, g := range good {
			fs[i] = g.f
		}
		_, err := extract.Compile(fs)
		p.compileErrors(err, node)
		return nil, nameNode
	}
	ex, err := extract.Compile(it.Fields)
	if err != nil {
		p.compileErrors(err, node)
		return nil, nameNode
	}
	it.Extractor = ex
	return it, nameNode
}

func posOf(pos map[string]*yaml.Node, key string) *yaml.Node {
	if n, ok := pos[key]; ok {
		return n
	}
	return pos[""]
}

// compileErrors reports extract.Compile's errors at their keys' nodes;
// node maps a compiled field index to its node and index in the file.
func (p *fileParser) compileErrors(err error, node func(i int, key string) (*yaml.Node, int)) {
	if err == nil {
		return
	}
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	for _, e := range list {
		var ce *extract.CompileError
		if errors.As(e, &ce) {
			n, orig := node(ce.Index, ce.Key)
			c := *ce
			c.Index = orig
			p.errorf(n, "%v", &c)
		} else {
			p.errorf(nil, "%v", e)
		}
	}
}

// field parses one extract.Field; pos maps each key (and "transform[i]")
// to its node, "" to the field's mapping.
func (p *fileParser) field(n *yaml.Node) (extract.Field, map[string]*yaml.Node) {
	var f extract.Field
	pos := map[string]*yaml.Node{"": n}
	for _, kv := range p.mapping(n, "field", fieldKeys) {
		v := kv.v
		pos[kv.key] = v
		switch kv.key {
		case "name":
			pos["name"] = v
			f.Name, _ = p.str(v)
		case "css", "xpath", "regex", "json":
			s, ok := p.str(v)
			if !ok {
				break
			}
			if s == "" {
				p.errorf(v, "%s: empty", kv.key)
				break
			}
			switch kv.key {
			case "css":
				f.CSS = s
			case "xpath":
				f.XPath = s
			case "regex":
				f.Regex = s
			case "json":
				f.JSON = s
			}
		case "attr":
			f.Attr, _ = p.str(v)
		case "list":
			f.List, _ = p.boolean(v)
		case "required":
			f.Required, _ = p.boolean(v)
		case "type":
			f.Type, _ = p.str(v)
		case "transform":
			for _, tn := range p.seq(v) {
				var t extract.Transform
				if err := t.UnmarshalYAML(tn); err != nil {
					p.errorf(tn, "%v", err)
					continue
				}
				pos[fmt.Sprintf("transform[%d]", len(f.Transform))] = tn
				f.Transform = append(f.Transform, t)
			}
		}
	}
	return f, pos
}
