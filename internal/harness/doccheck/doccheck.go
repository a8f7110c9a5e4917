// Package doccheck keeps README.md and docs/ true to the code: the
// sections generated from the code (docs/cli.md, docs/configuration.md)
// are compared with what the code makes now, and the command lines of
// the docs are extracted, the docs' own shell functions (deploy's rcm)
// expanded, for the binaries' tests to parse or run.
package doccheck

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/cli"
)

// UpdateEnv, set to 1, makes Sync write the generated sections instead of
// comparing them: make docs.
const UpdateEnv = "REDCRAWL_UPDATE_DOCS"

// Files returns the docs a user reads, relative to the repository root:
// README.md, rules/README.md and docs/*.md.
func Files(t testing.TB) []string {
	t.Helper()
	root := testutil.RepoRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md", filepath.Join("rules", "README.md")}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rel)
	}
	return out
}

// markers returns the lines that open and close the generated section
// name.
func markers(name string) (begin, end string) {
	return "<!-- generated: " + name + " (make docs); do not edit -->\n", "<!-- end generated: " + name + " -->\n"
}

// Sync checks that the section name of the file path (relative to the
// repository root), between its markers, is want; with REDCRAWL_UPDATE_DOCS=1
// it writes want there instead.
func Sync(t testing.TB, path, name, want string) {
	t.Helper()
	file := filepath.Join(testutil.RepoRoot(t), path)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := markers(name)
	before, rest, ok := strings.Cut(string(b), begin)
	var got, after string
	if ok {
		got, after, ok = strings.Cut(rest, end)
	}
	if !ok {
		t.Fatalf("%s has no section between %q and %q", path, begin, end)
	}
	if !strings.HasSuffix(want, "\n") {
		want += "\n"
	}
	if got == want {
		return
	}
	if os.Getenv(UpdateEnv) == "1" {
		if err := os.WriteFile(file, []byte(before+begin+want+end+after), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: section %s written", path, name)
		return
	}
	t.Errorf("%s is out of date with the code: run `make docs` (section %s, -file +code):\n%s", path, name, cmp.Diff(got, want))
}

// Command is one command line of a doc.
type Command struct {
	File string            // the doc, relative to the repository root
	Line int               // where the command starts in it
	Text string            // the command as written (an alias's call, not its expansion)
	Env  map[string]string // the variables assigned in front of it (the alias's too)
	Args []string          // the program as written (bin/master), then its arguments
}

func (c Command) String() string { return fmt.Sprintf("%s:%d: %s", c.File, c.Line, c.Text) }

var (
	fenceRE  = regexp.MustCompile("(?ms)^( *)```([a-z]*)\n(.*?)^ *```")
	inlineRE = regexp.MustCompile("`([^`]+)`")
	assignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// Commands returns every command line of the docs that runs one of progs
// (base names: "master", "redcrawl-master"): in sh code blocks, and inline
// code spans that start with a program's path and are not a synopsis
// (no [, |, … or ...). A doc's shell functions (name() { ...; }) are
// expanded where the doc calls them.
func Commands(t testing.TB, progs ...string) []Command {
	t.Helper()
	root := testutil.RepoRoot(t)
	var out []Command
	for _, doc := range Files(t) {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		funcs := map[string]simple{}
		var cmds []Command
		for _, m := range fenceRE.FindAllStringSubmatchIndex(text, -1) {
			lang := text[m[4]:m[5]]
			if lang != "sh" && lang != "bash" && lang != "shell" {
				continue
			}
			indent := text[m[2]:m[3]]
			body := text[m[6]:m[7]]
			line := strings.Count(text[:m[6]], "\n") + 1
			var lines []string
			for _, l := range strings.Split(body, "\n") {
				lines = append(lines, strings.TrimPrefix(l, indent))
			}
			for _, sc := range parseScript(strings.Join(lines, "\n"), line) {
				if sc.funcName != "" {
					funcs[sc.funcName] = sc
					continue
				}
				cmds = append(cmds, Command{File: doc, Line: sc.line, Text: sc.text, Env: sc.env, Args: sc.words})
			}
		}
		prose := fenceRE.ReplaceAllStringFunc(text, func(s string) string { return strings.Repeat("\n", strings.Count(s, "\n")) })
		for _, m := range inlineRE.FindAllStringSubmatchIndex(prose, -1) {
			span := prose[m[2]:m[3]]
			if strings.Contains(span, "\n\n") || strings.ContainsAny(span, "[|…") || strings.Contains(span, "...") {
				continue // not one span: a stray backtick; or a synopsis
			}
			span = strings.Join(strings.Fields(span), " ")
			if span == "" {
				continue
			}
			line := strings.Count(prose[:m[2]], "\n") + 1
			scs := parseScript(span, line)
			if len(scs) != 1 || len(scs[0].words) < 2 || !strings.Contains(scs[0].words[0], "/") && funcs[scs[0].words[0]].funcName == "" &&
				!isProg(scs[0].words[0], progs) && !isProg(scs[0].words[0], []string{"master", "slave"}) {
				continue
			}
			sc := scs[0]
			cmds = append(cmds, Command{File: doc, Line: line, Text: sc.text, Env: sc.env, Args: sc.words})
		}
		for _, c := range cmds {
			if f, ok := funcs[c.Args[0]]; ok {
				c = expand(f, c)
			}
			if len(c.Args) > 0 && isProg(c.Args[0], progs) {
				out = append(out, c)
			}
		}
	}
	return out
}

// isProg reports whether word runs one of progs (by its base name).
func isProg(word string, progs []string) bool {
	base := filepath.Base(word)
	for _, p := range progs {
		if base == p {
			return true
		}
	}
	return false
}

// expand replaces a call of the shell function f by f's body.
func expand(f simple, c Command) Command {
	env := map[string]string{}
	for k, v := range f.env {
		env[k] = v
	}
	for k, v := range c.Env {
		env[k] = v
	}
	args := c.Args[1:]
	var words []string
	for _, w := range f.words {
		switch {
		case w == "$@" || w == "$*":
			words = append(words, args...)
		case strings.HasPrefix(w, "${@:") && strings.HasSuffix(w, "}"):
			var n int
			fmt.Sscanf(w, "${@:%d}", &n)
			if n >= 1 && n-1 <= len(args) {
				words = append(words, args[n-1:]...)
			}
		case len(w) == 2 && w[0] == '$' && w[1] >= '1' && w[1] <= '9':
			if i := int(w[1] - '1'); i < len(args) {
				words = append(words, args[i])
			}
		default:
			words = append(words, w)
		}
	}
	c.Env, c.Args = env, words
	return c
}

// simple is one simple command of a script: its variables, its words,
// or a function definition (funcName, with the body's command).
type simple struct {
	line     int
	text     string
	env      map[string]string
	words    []string
	funcName string
}

// parseScript splits a shell script into its simple commands: quotes,
// backslash-newlines and comments are read as the shell reads them;
// ;, &&, ||, | and & separate commands; redirections and their targets,
// and the keywords of loops and conditionals (for ...; do, then) are
// dropped; a command substitution or $var stays one word as written.
// Good enough for documentation, not a shell.
func parseScript(script string, firstLine int) []simple {
	script = strings.ReplaceAll(script, "\\\n", " ")
	var (
		out      []simple
		cur      []string
		start    = firstLine
		line     = firstLine
		word     strings.Builder
		inWord   bool
		textFrom int
		heredoc  string // the delimiter of a here-document whose lines follow
	)
	flushWord := func() {
		if inWord {
			cur = append(cur, word.String())
			word.Reset()
			inWord = false
		}
	}
	flushCmd := func(end int) {
		flushWord()
		if sc, ok := makeSimple(cur); ok {
			sc.line = start
			sc.text = strings.TrimSpace(strings.Join(strings.Fields(script[textFrom:end]), " "))
			out = append(out, sc)
		}
		cur = nil
		start = line
		textFrom = end
	}
	for i := 0; i < len(script); i++ {
		c := script[i]
		switch {
		case c == '\n':
			flushCmd(i)
			line++
			if heredoc != "" { // skip the document, to its delimiter line
				for {
					end := strings.IndexByte(script[i+1:], '\n')
					if end < 0 {
						i = len(script)
						break
					}
					l := script[i+1 : i+1+end]
					i += end + 1
					line++
					if strings.TrimSpace(l) == heredoc {
						break
					}
				}
				heredoc = ""
				textFrom = min(i+1, len(script))
			}
			start = line
		case c == ' ' || c == '\t':
			flushWord()
		case c == '#' && !inWord:
			for i < len(script) && script[i] != '\n' {
				i++
			}
			i--
		case c == '\'':
			inWord = true
			j := strings.IndexByte(script[i+1:], '\'')
			if j < 0 {
				j = len(script) - i - 1
			}
			word.WriteString(script[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			for i++; i < len(script) && script[i] != '"'; i++ {
				if script[i] == '\\' && i+1 < len(script) && strings.IndexByte("\"\\$`", script[i+1]) >= 0 {
					i++
				}
				word.WriteByte(script[i])
			}
		case c == '\\' && i+1 < len(script):
			inWord = true
			i++
			word.WriteByte(script[i])
		case c == '$' && i+1 < len(script) && script[i+1] == '(' || c == '<' && i+1 < len(script) && script[i+1] == '(':
			// a command or process substitution: one word, as written
			depth := 0
			j := i + 1
			for ; j < len(script); j++ {
				if script[j] == '(' {
					depth++
				} else if script[j] == ')' {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			inWord = true
			word.WriteString(script[i:min(j+1, len(script))])
			i = j
		case c == ';' || c == '&' || c == '|':
			flushCmd(i)
			for i+1 < len(script) && (script[i+1] == '&' || script[i+1] == '|' || script[i+1] == ';') {
				i++
			}
			textFrom = i + 1
		case (c == '>' || c == '<') && !inWord || (c == '>' || c == '<') && isDigits(word.String()):
			// a redirection: drop it and its target
			word.Reset()
			inWord = false
			here := c == '<' && i+1 < len(script) && script[i+1] == '<'
			for i+1 < len(script) && (script[i+1] == '>' || script[i+1] == '&' || script[i+1] == '<' || script[i+1] == '-') {
				i++
			}
			for i+1 < len(script) && (script[i+1] == ' ' || script[i+1] == '\t') {
				i++
			}
			if i+1 < len(script) && script[i+1] == '(' || i+2 < len(script) && script[i+1] == '<' && script[i+2] == '(' {
				continue // <(...): the substitution is the next word
			}
			from := i + 1
			for i+1 < len(script) && strings.IndexByte(" \t\n;&|", script[i+1]) < 0 {
				i++
			}
			if here {
				heredoc = strings.Trim(script[from:i+1], `'"`)
			}
			cur = append(cur, "\x00redirect")
		default:
			inWord = true
			word.WriteByte(c)
		}
	}
	flushCmd(len(script))
	return out
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// keywords start a part of a compound command that the command after
// them follows.
var keywords = map[string]bool{"do": true, "then": true, "else": true, "if": true, "while": true, "until": true,
	"!": true, "{": true, "}": true, "(": true, ")": true, "done": true, "fi": true, "time": true, "exec": true}

// makeSimple makes a simple command of words: its leading assignments,
// its words without keywords and redirections. A function definition
// (name() { cmd; }) keeps cmd as its body.
func makeSimple(words []string) (simple, bool) {
	var ws []string
	for _, w := range words {
		if w != "\x00redirect" {
			ws = append(ws, w)
		}
	}
	if len(ws) > 0 && strings.HasSuffix(ws[0], "()") {
		body, ok := makeSimple(ws[1:])
		body.funcName = strings.TrimSuffix(ws[0], "()")
		return body, ok || body.funcName != ""
	}
	for len(ws) > 0 && keywords[ws[0]] {
		ws = ws[1:]
	}
	if len(ws) > 0 && (ws[0] == "for" || ws[0] == "export" || ws[0] == "local" || ws[0] == "case") {
		return simple{}, false
	}
	env := map[string]string{}
	for len(ws) > 0 && assignRE.MatchString(ws[0]) {
		k, v, _ := strings.Cut(ws[0], "=")
		env[k] = v
		ws = ws[1:]
	}
	for len(ws) > 0 && keywords[ws[len(ws)-1]] {
		ws = ws[:len(ws)-1]
	}
	if len(ws) == 0 {
		return simple{}, false
	}
	return simple{env: env, words: ws}, true
}

// CheckParse parses every command line of the docs that runs one of progs
// with the commands' real flag sets: run is the program's main (its
// arguments after the program's name), run inside cli.ParseOnly. Each
// line must reach its command's flags and parse them (or ask for -h),
// with no flag left after the command's arguments, but for the commands
// of flagsAnywhere ("master crawl"), which read flags after them too. It
// returns the number of lines checked.
func CheckParse(t *testing.T, run func(args []string, stdout, stderr io.Writer) int, progs []string, flagsAnywhere ...string) int {
	t.Helper()
	t.Setenv(cli.EnvConfig, "")
	cmds := Commands(t, progs...)
	for _, c := range cmds {
		var out, errOut bytes.Buffer
		var code int
		parsed := cli.ParseOnly(func() { code = run(c.Args[1:], &out, &errOut) })
		help := slices.Contains(c.Args, "-h") || slices.Contains(c.Args, "--help")
		if code != 0 || len(parsed) == 0 && !help {
			msg, _, _ := strings.Cut(errOut.String(), "\n\n")
			t.Errorf("%s\n  ran as %q: exit %d, no flags parsed: %s", c, c.Args, code, msg)
			continue
		}
		if help {
			continue
		}
		p := parsed[len(parsed)-1]
		if slices.Contains(flagsAnywhere, p.Command) {
			p.Flags.SetOutput(io.Discard)
			for rest := p.Args; len(rest) > 0; rest = p.Flags.Args() {
				if err := p.Flags.Parse(rest[1:]); err != nil {
					t.Errorf("%s\n  %v", c, err)
					break
				}
			}
			continue
		}
		for _, a := range p.Args {
			if strings.HasPrefix(a, "-") && a != "-" {
				t.Errorf("%s\n  %s after the arguments is not read as a flag: put the flags first", c, a)
			}
		}
	}
	t.Logf("%d command lines of %s parsed", len(cmds), strings.Join(progs, ", "))
	return len(cmds)
}
