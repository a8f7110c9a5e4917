package rules

// Readers of YAML nodes: mappings with known keys, sequences and scalars of
// each type (strings, numbers, regexes, hosts, durations), each reporting a
// wrong node at its position.

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/idna"
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

func posOf(pos map[string]*yaml.Node, key string) *yaml.Node {
	if n, ok := pos[key]; ok {
		return n
	}
	return pos[""]
}
