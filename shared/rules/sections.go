package rules

// Parsers of a rule file's sections: politeness, session, fetch, render,
// items and their fields.

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/redcrawl/redcrawl/shared/extract"
	"go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"
)

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

// fetch parses the fetch section: the site's user agents, extra
// headers, retried statuses and request timeout.
func (p *fileParser) fetch(n *yaml.Node, f *Fetch) {
	for _, kv := range p.mapping(n, "fetch", fetchKeys) {
		v := kv.v
		switch kv.key {
		case "user_agents":
			list := p.seq(v)
			for _, e := range list {
				if s, ok := p.str(e); ok {
					if msg := badUserAgent(s); msg != "" {
						p.errorf(e, "user agent %q: %s", s, msg)
						continue
					}
					f.UserAgents = append(f.UserAgents, s)
				}
			}
			if v.Kind == yaml.SequenceNode && len(list) == 0 {
				p.errorf(v, "user_agents: empty (leave it out for the crawl's)")
			}
		case "headers":
			p.headers(v, f)
		case "retry_statuses":
			f.RetryStatuses = []int{} // present: empty retries nothing
			seen := map[int]bool{}
			for _, e := range p.seq(v) {
				var st int
				switch {
				case e.Kind != yaml.ScalarNode || e.Tag != "!!int" || e.Decode(&st) != nil:
					p.errorf(e, "retry_statuses: want an integer status, got %s", describe(e))
				case st < 400 || st > 599:
					p.errorf(e, "retry status %d: want a 4xx or 5xx status (400 to 599)", st)
				case seen[st]:
					p.errorf(e, "duplicate retry status %d", st)
				default:
					seen[st] = true
					f.RetryStatuses = append(f.RetryStatuses, st)
				}
			}
		case "timeout":
			if d, ok := p.duration(v); ok {
				if d == 0 {
					p.errorf(v, "timeout must be > 0 (leave it out for fetch.timeout)")
				} else {
					f.Timeout = d
				}
			}
		}
	}
}

// badUserAgent says what is wrong with a user agent, "" when nothing.
func badUserAgent(ua string) string {
	switch {
	case strings.TrimSpace(ua) == "":
		return "empty"
	case !httpguts.ValidHeaderFieldValue(ua):
		return "control characters (CR, LF...) are not allowed"
	}
	return ""
}

// slaveHeaders are the request headers a rule file may not set, and why.
var slaveHeaders = map[string]string{
	"Host":                "the URL's",
	"User-Agent":          "set fetch.user_agents",
	"Accept-Encoding":     "the slave asks for the encodings it decodes",
	"If-None-Match":       "a recrawl's conditional header",
	"If-Modified-Since":   "a recrawl's conditional header",
	"Content-Length":      "a GET has no body",
	"Transfer-Encoding":   "a GET has no body",
	"Connection":          "hop-by-hop, the transport's",
	"Keep-Alive":          "hop-by-hop, the transport's",
	"Proxy-Connection":    "hop-by-hop, the transport's",
	"Te":                  "hop-by-hop, the transport's",
	"Trailer":             "hop-by-hop, the transport's",
	"Upgrade":             "hop-by-hop, the transport's",
	"Proxy-Authorization": "the proxy URL's credentials",
}

// headers parses fetch.headers: a mapping of header names to string
// values.
func (p *fileParser) headers(n *yaml.Node, f *Fetch) {
	if n.Kind != yaml.MappingNode {
		p.typeErrorf(n, "want a mapping of header names to values, got %s", describe(n))
		return
	}
	if len(n.Content) == 0 {
		p.errorf(n, "headers: empty (leave it out for none)")
		return
	}
	h := http.Header{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			p.errorf(k, "headers: a header name must be a string, got %s", describe(k))
			continue
		}
		name := k.Value
		if !httpguts.ValidHeaderFieldName(name) {
			p.errorf(k, "header name %q: want letters, digits and - (RFC 9110 token)", name)
			continue
		}
		canon := http.CanonicalHeaderKey(name)
		if why, ok := slaveHeaders[canon]; ok {
			p.errorf(k, "header %q may not be set by a rule file (%s)", name, why)
			continue
		}
		if _, dup := h[canon]; dup {
			p.errorf(k, "duplicate header %q", canon)
			continue
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			p.errorf(v, "header %s: want a string, got %s", canon, describe(v))
			continue
		}
		if !httpguts.ValidHeaderFieldValue(v.Value) {
			p.errorf(v, "header %s: control characters (CR, LF...) are not allowed in a value", canon)
			continue
		}
		h[canon] = []string{v.Value}
	}
	if len(h) > 0 {
		f.Headers = h
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
		case "types":
			it.Types = p.mediaTypes(kv.v)
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
	var good, bad []parsed
	for i, fn := range p.seq(fieldsNode) {
		fb := len(p.errs)
		f, pos := p.field(fn)
		if len(p.errs) == fb {
			good = append(good, parsed{f, pos, i})
			it.Fields = append(it.Fields, f)
		} else if f.CSS != "" || f.XPath != "" || f.Regex != "" || f.JSON != "" {
			bad = append(bad, parsed{f, pos, i})
		}
	}
	// a field with another error still has its selector checked, so that
	// one run reports every invalid selector
	for _, b := range bad {
		sel := extract.Field{Name: b.f.Name, CSS: b.f.CSS, XPath: b.f.XPath, Regex: b.f.Regex, JSON: b.f.JSON}
		if sel.Name == "" {
			sel.Name = fmt.Sprintf("#%d", b.orig+1)
		}
		_, err := extract.Compile([]extract.Field{sel})
		p.compileErrors(onlySelectorErrors(err), func(_ int, key string) (*yaml.Node, int) { return posOf(b.pos, key), b.orig })
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

// onlySelectorErrors keeps extract.Compile's errors about a selector (css,
// xpath, regex, json): what a field with other errors is checked for.
func onlySelectorErrors(err error) error {
	if err == nil {
		return nil
	}
	list := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	}
	var keep []error
	for _, e := range list {
		var ce *extract.CompileError
		if errors.As(e, &ce) {
			switch ce.Key {
			case "css", "xpath", "regex", "json":
				keep = append(keep, e)
			}
		}
	}
	return errors.Join(keep...)
}

// mediaTypeRE is a media type pattern of an item rule's types: type/sub,
// type/* or */*.
var mediaTypeRE = regexp.MustCompile(`^([a-z0-9][a-z0-9!#$&^_.+-]*/([a-z0-9][a-z0-9!#$&^_.+-]*|\*)|\*/\*)$`)

// mediaTypes parses an item rule's types: a list of media types, lower
// case, each type/sub, type/* or */*.
func (p *fileParser) mediaTypes(n *yaml.Node) []string {
	var out []string
	for _, e := range p.seq(n) {
		s, ok := p.str(e)
		if !ok {
			continue
		}
		t := strings.ToLower(strings.TrimSpace(s))
		if !mediaTypeRE.MatchString(t) {
			p.errorf(e, "types: %q is not a media type (text/html, application/json, text/*, */*)", s)
			continue
		}
		out = append(out, t)
	}
	if len(out) == 0 && n.Kind == yaml.SequenceNode {
		p.errorf(n, "types: empty (leave it out for HTML)")
	}
	return out
}
