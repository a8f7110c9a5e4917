package urlx

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Scope decides whether a URL may be crawled: by link depth, host, and
// allow and deny regexes. It is immutable and safe for concurrent use.
type Scope struct {
	maxDepth int
	exact    map[string]struct{} // allowed host names
	suffixes []string            // ".example.com" for "*.example.com"
	allow    []*regexp.Regexp
	deny     []*regexp.Regexp
}

// Reasons returned by Scope.Check.
const (
	ReasonDepth = "depth"
	ReasonHost  = "host"
	ReasonAllow = "allow"
	ReasonDeny  = "deny"
)

// NewScope returns a Scope.
//
// allowHosts lists host names (case-insensitive, IDNs in Unicode or
// punycode, no port); "*.example.com" matches example.com and every host
// below it. An empty allowHosts does not restrict hosts. allow and deny are
// regular expressions (Go syntax) matched against the canonical URL: when
// allow is not empty a URL must match one of them, and a URL matching any
// deny regex is refused. maxDepth is the largest link depth allowed;
// 0 = unlimited.
//
// Errors name the bad entry by its configuration key, e.g.
// "crawl.deny[2]: error parsing regexp: ...".
func NewScope(allowHosts, allow, deny []string, maxDepth int) (*Scope, error) {
	if maxDepth < 0 {
		return nil, fmt.Errorf("crawl.max_depth: %d must be >= 0 (0 = unlimited)", maxDepth)
	}
	s := &Scope{maxDepth: maxDepth, exact: make(map[string]struct{}, len(allowHosts))}
	for i, h := range allowHosts {
		name, wildcard := strings.CutPrefix(strings.TrimSpace(h), "*.")
		host, err := canonHostName(name)
		if err != nil {
			return nil, fmt.Errorf("crawl.allow_hosts[%d]: %q: %w", i, h, err)
		}
		s.exact[host] = struct{}{}
		if wildcard {
			s.suffixes = append(s.suffixes, "."+host)
		}
	}
	var err error
	if s.allow, err = compileAll("crawl.allow", allow); err != nil {
		return nil, err
	}
	if s.deny, err = compileAll("crawl.deny", deny); err != nil {
		return nil, err
	}
	return s, nil
}

// canonHostName returns the canonical form of an allow_hosts entry, as it
// appears in canonical URLs: a domain name or an IPv4 address.
func canonHostName(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, "/:?#@*[]\\ ") {
		return "", fmt.Errorf("not a host name (want a bare name such as example.com or *.example.com)")
	}
	return parseHost(name)
}

func compileAll(key string, patterns []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(patterns))
	for i, p := range patterns {
		if p == "" {
			return nil, fmt.Errorf("%s[%d]: empty regex would match every url", key, i)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// Check reports whether u, found at link depth depth (0 for a seed), may be
// crawled; if not, reason says which rule refused it, checked in this
// order: "depth", "host", "allow", "deny".
func (s *Scope) Check(u *url.URL, depth int) (ok bool, reason string) {
	if s.maxDepth > 0 && depth > s.maxDepth {
		return false, ReasonDepth
	}
	if u == nil {
		return false, ReasonHost
	}
	if len(s.exact) > 0 && !s.hostAllowed(u.Hostname()) {
		return false, ReasonHost
	}
	if len(s.allow) == 0 && len(s.deny) == 0 {
		return true, ""
	}
	str := u.String()
	if len(s.allow) > 0 {
		matched := false
		for _, re := range s.allow {
			if re.MatchString(str) {
				matched = true
				break
			}
		}
		if !matched {
			return false, ReasonAllow
		}
	}
	for _, re := range s.deny {
		if re.MatchString(str) {
			return false, ReasonDeny
		}
	}
	return true, ""
}

// HostPatterns returns allowHosts in canonical form, sorted: a host name,
// or "*.name" for a name and every host below it (the frontier's
// functions check links against them: frontier.Options.AllowHosts).
func (s *Scope) HostPatterns() []string {
	wild := map[string]bool{}
	for _, suf := range s.suffixes {
		wild[suf[1:]] = true
	}
	out := make([]string, 0, len(s.exact))
	for h := range s.exact {
		if wild[h] {
			h = "*." + h
		}
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// hostAllowed matches a host name against allowHosts.
func (s *Scope) hostAllowed(host string) bool {
	host = strings.TrimSuffix(asciiLower(host), ".")
	if _, ok := s.exact[host]; ok {
		return true
	}
	for _, suf := range s.suffixes {
		if strings.HasSuffix(host, suf) {
			return true
		}
	}
	return false
}
