package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/redcrawl/redcrawl/internal/harness/doccheck"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
)

// refRow is one key of docs/configuration.md.
type refRow struct {
	key, def, env, meaning string
}

var (
	// envNoteRE is a comment's "Env: CRAWLER_X" note (the env column
	// says it), with an example value or a list of them.
	envNoteRE = regexp.MustCompile(`\s*Env: CRAWLER_[A-Z0-9_]+(=\S+)?(,\s*CRAWLER_[A-Z0-9_]+(=\S+)?)*(\s*\(comma-separated\))?`)
	spacesRE  = regexp.MustCompile(`\s+`)
)

// configReference renders docs/configuration.md's reference from the
// definitions: every key of the Config struct (keys.leaves), its
// environment variable (envName), its default (as config.yaml writes it,
// which TestRepoConfigIsDefault holds equal to Default()) and what it
// does (config.yaml's comment above it, which TestRepoConfigListsEveryKey
// holds to every key).
func configReference(t *testing.T) string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		t.Fatal(err)
	}
	var sections []string
	rows := map[string][]refRow{}
	var walk func(n *yaml.Node, prefix, section string, prev *refRow)
	walk = func(n *yaml.Node, prefix, section string, prev *refRow) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := join(prefix, k.Value)
			if _, leaf := keys.leaves[key]; !leaf {
				if v.Kind != yaml.MappingNode {
					t.Errorf("config.yaml: %s is no key of the config", key)
					continue
				}
				walk(v, key, section, prev)
				continue
			}
			meaning := comment(k.HeadComment)
			if meaning == "" && prev != nil {
				meaning = "As `" + prev.key + "` above."
			} else if meaning == "" {
				t.Errorf("config.yaml: %s has no comment", key)
			}
			row := refRow{key: key, def: yamlValue(t, v), env: envName(key), meaning: meaning}
			rows[section] = append(rows[section], row)
			if k.HeadComment != "" {
				cp := row
				prev = &cp
			}
		}
	}
	top := doc.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		section := top.Content[i].Value
		sections = append(sections, section)
		walk(top.Content[i+1], section, section, nil)
	}
	var documented []string
	for _, rs := range rows {
		for _, r := range rs {
			documented = append(documented, r.key)
		}
	}
	for k := range keys.leaves {
		if !slices.Contains(documented, k) {
			t.Errorf("config.yaml does not list %s", k)
		}
	}
	sort.Strings(documented)

	var b strings.Builder
	fmt.Fprintf(&b, "%d keys in %d sections: ", len(documented), len(sections))
	for i, s := range sections {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "[%s](#%s)", s, s)
	}
	b.WriteString(".\n")
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n| key | default | environment | what it does |\n| --- | --- | --- | --- |\n", s)
		for _, r := range rows[s] {
			fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", r.key, r.def, r.env, cell(r.meaning))
		}
	}
	return b.String()
}

// comment is a key's head comment as one paragraph, without the "#"s
// and its Env note.
func comment(head string) string {
	var lines []string
	for _, l := range strings.Split(head, "\n") {
		lines = append(lines, strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(l), "#"), " "))
	}
	s := strings.Join(lines, " ")
	s = envNoteRE.ReplaceAllString(s, "")
	return strings.TrimSpace(spacesRE.ReplaceAllString(s, " "))
}

// yamlValue is a default as config.yaml writes it, as inline code.
func yamlValue(t *testing.T, v *yaml.Node) string {
	t.Helper()
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Value == "" {
			return "`\"\"`"
		}
		return "`" + v.Value + "`"
	case yaml.SequenceNode:
		var items []string
		for _, c := range v.Content {
			items = append(items, c.Value)
		}
		return "`[" + strings.Join(items, ", ") + "]`"
	case yaml.MappingNode:
		if len(v.Content) == 0 {
			return "`{}`"
		}
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return "`" + strings.TrimSpace(string(b)) + "`"
}

// cell makes text safe in a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// TestConfigReference keeps docs/configuration.md's reference what the
// config's definitions say; REDCRAWL_UPDATE_DOCS=1 (make docs) rewrites
// it.
func TestConfigReference(t *testing.T) {
	doccheck.Sync(t, "docs/configuration.md", "keys", configReference(t))
}
