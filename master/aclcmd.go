package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

const aclUsage = `usage: master acl --crawl NAME [--role slave|master|admin] [--slave ID] [--user NAME] [--password-file F] [--format aclfile|setuser]
       master acl --mysql [flags]   (MySQL GRANTs: master acl --mysql -h)

Prints the Redis ACL rules of a role of a crawl: an ACL file line (aclfile,
the default) or the ACL SETUSER command (setuser). A slave's user may touch
its crawl's frontier keys with the commands its scripts run, its own lease
and heartbeat keys, and nothing else: see docs/deploy.md.
--password-file F puts F's password in the rules as its SHA-256; when F
does not exist a random password is written to it (mode 0600) first.
`

// aclCmd runs "master acl"; it returns the exit status.
func aclCmd(args []string, stdout, stderr io.Writer) int {
	if isACLMySQL(args) {
		return runACLMySQL(args, stdout, stderr)
	}
	fs := cli.New("master acl", aclUsage, stdout, stderr)
	cfgPath := fs.ConfigFile("", "config file: its crawl.name when --crawl is not given")
	crawl := fs.String("crawl", "", "crawl name")
	role := fs.String("role", frontier.RoleSlave, "slave, master or admin")
	slave := fs.String("slave", "", "slave id (the slave role: one Redis user per slave)")
	user := fs.String("user", "", "Redis user name (default redcrawl-slave-ID, redcrawl-master-CRAWL, redcrawl-admin-CRAWL)")
	pwFile := fs.String("password-file", "", "file holding the user's password (created with a random one when missing)")
	format := fs.String("format", "aclfile", "aclfile or setuser")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "master acl: unexpected arguments %q\n%s", fs.Args(), aclUsage)
		return 2
	}
	name := *crawl
	if name == "" && *cfgPath != "" {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			fmt.Fprintf(stderr, "master: %v\n", err)
			return config.ExitCode(err)
		}
		name = cfg.Crawl.Name
	}
	if name == "" {
		fmt.Fprintf(stderr, "master acl: --crawl is required\n%s", aclUsage)
		return 2
	}
	if *role == frontier.RoleSlave && *slave == "" {
		fmt.Fprintln(stderr, "master acl: the slave role needs --slave ID (one Redis user per slave)")
		return 2
	}
	rules, err := frontier.ACLRules(name, *role, *slave)
	if err != nil {
		fmt.Fprintf(stderr, "master %v\n", err)
		return 2
	}
	u := *user
	if u == "" {
		u = frontier.ACLUserName(name, *role, *slave)
	}
	if u == "" || strings.ContainsAny(u, " \t\n\r(){}\"'>#<~%&") {
		fmt.Fprintf(stderr, "master acl: --user %q: no spaces, quotes, braces, parentheses or ACL rule characters\n", u)
		return 2
	}
	if *pwFile != "" {
		pw, err := passwordFile(*pwFile)
		if err != nil {
			fmt.Fprintf(stderr, "master acl: %v\n", err)
			return 1
		}
		rules = frontier.WithPassword(rules, pw)
	}
	switch *format {
	case "aclfile":
		if *pwFile == "" {
			fmt.Fprintf(stdout, "# %s has no password yet: add >PASSWORD or #SHA256 to the line, or rerun with --password-file\n", u)
		}
		fmt.Fprintln(stdout, frontier.ACLFileLine(u, rules))
	case "setuser":
		quoted := make([]string, len(rules))
		for i, r := range rules {
			quoted[i] = "'" + r + "'"
		}
		fmt.Fprintf(stdout, "ACL SETUSER %s %s\n", u, strings.Join(quoted, " "))
	default:
		fmt.Fprintf(stderr, "master acl: --format %q: want aclfile or setuser\n", *format)
		return 2
	}
	return 0
}

// passwordFile reads a password file, first writing a random password to
// it (mode 0600) when it does not exist.
func passwordFile(path string) (string, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		raw := make([]byte, 24)
		if _, err := rand.Read(raw); err != nil {
			return "", fmt.Errorf("password file %s: %w", path, err)
		}
		pw := base64.RawURLEncoding.EncodeToString(raw)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", fmt.Errorf("password file %s: %w", path, err)
		}
		if _, err := f.WriteString(pw + "\n"); err != nil {
			f.Close()
			return "", fmt.Errorf("password file %s: %w", path, err)
		}
		if err := f.Close(); err != nil {
			return "", fmt.Errorf("password file %s: %w", path, err)
		}
		return pw, nil
	}
	if err != nil {
		return "", fmt.Errorf("password file %s: %w", path, err)
	}
	// read as the slave and master read redis.password_file
	return config.ReadSecretFile("--password-file", path)
}
