package rules

// Parsing one rule file: its top-level keys, the errors with file:line:col,
// and the YAML it refuses (aliases).

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/redcrawl/redcrawl/shared/urlx"
	"go.yaml.in/yaml/v3"
)

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
		case "fetch":
			p.fetch(v, &rs.Fetch)
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
	topKeys        = []string{"name", "hosts", "urls", "priority", "scope", "strategy", "politeness", "session", "fetch", "render", "items", "schedule", "sitemaps"}
	scopeKeys      = []string{"allow", "deny", "max_depth"}
	politenessKeys = []string{"delay", "jitter", "concurrency"}
	sessionKeys    = []string{"proxies", "proxy_pool", "cookies"}
	fetchKeys      = []string{"user_agents", "headers", "retry_statuses", "timeout"}
	renderKeys     = []string{"match", "wait_selector", "wait_network_idle", "timeout", "scroll", "click", "block", "maybe_dynamic"}
	clickKeys      = []string{"selector", "times"}
	maybeKeys      = []string{"match", "min_links"}
	itemKeys       = []string{"name", "match", "types", "fields"}
	fieldKeys      = []string{"name", "css", "xpath", "regex", "json", "attr", "list", "required", "type", "transform"}
	blockTypes     = []string{"image", "font", "media", "stylesheet"}
)
