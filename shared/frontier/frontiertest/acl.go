package frontiertest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// ACLRedis is a private redis-server whose only users are its ACL file's:
// root (every right, for the test's own checks), the crawl's master and
// admin, and one user per slave, each with the rules frontier.ACLRules
// gives (what bin/master acl prints). The default user is off.
type ACLRedis struct {
	*testutil.RedisServer
	Crawl string
	Root  *redis.Client
}

// ACLPassword is the password of a user of an ACLRedis.
func ACLPassword(user string) string { return "pw-of-" + user }

// StartACLRedis starts an ACLRedis for a crawl and its slaves.
func StartACLRedis(t testing.TB, crawl string, slaves ...string) *ACLRedis {
	t.Helper()
	s := StartACLRedisCrawls(t, map[string][]string{crawl: slaves})
	s.Crawl = crawl
	return s
}

// StartACLRedisCrawls starts an ACLRedis serving several crawls, each with
// its master, admin and slaves (slave ids distinct across the crawls); its
// Crawl is "": connect with CrawlURL and CrawlClient.
func StartACLRedisCrawls(t testing.TB, crawls map[string][]string) *ACLRedis {
	t.Helper()
	lines := []string{"user default off", "user root on >root-pw ~* &* +@all"}
	add := func(crawl, role, slave string) {
		rules, err := frontier.ACLRules(crawl, role, slave)
		if err != nil {
			t.Fatal(err)
		}
		user := frontier.ACLUserName(crawl, role, slave)
		lines = append(lines, frontier.ACLFileLine(user, frontier.WithPassword(rules, ACLPassword(user))))
	}
	for crawl, slaves := range crawls {
		add(crawl, frontier.RoleMaster, "")
		add(crawl, frontier.RoleAdmin, "")
		for _, s := range slaves {
			add(crawl, frontier.RoleSlave, s)
		}
	}
	aclFile := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(aclFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := testutil.StartRedis(t, func(ctx context.Context, addr string) error {
		c := redis.NewClient(&redis.Options{Addr: addr, Username: "root", Password: "root-pw", MaxRetries: -1})
		defer c.Close()
		return c.Ping(ctx).Err()
	}, "--aclfile", aclFile)
	root := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "root", Password: "root-pw"})
	t.Cleanup(func() { root.Close() })
	return &ACLRedis{RedisServer: srv, Root: root}
}

// URL is the redis:// URL of a role's user of the crawl (slave: the
// slave's).
func (s *ACLRedis) URL(role, slave string) string { return s.CrawlURL(s.Crawl, role, slave) }

// CrawlURL is the redis:// URL of a role's user of a crawl.
func (s *ACLRedis) CrawlURL(crawl, role, slave string) string {
	user := frontier.ACLUserName(crawl, role, slave)
	u := url.URL{Scheme: "redis", User: url.UserPassword(user, ACLPassword(user)), Host: s.Addr, Path: "/0"}
	return u.String()
}

// Client connects as a role's user of the crawl.
func (s *ACLRedis) Client(t testing.TB, role, slave string) *redis.Client {
	return s.CrawlClient(t, s.Crawl, role, slave)
}

// CrawlClient connects as a role's user of a crawl.
func (s *ACLRedis) CrawlClient(t testing.TB, crawl, role, slave string) *redis.Client {
	t.Helper()
	user := frontier.ACLUserName(crawl, role, slave)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Username: user, Password: ACLPassword(user), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

// Denials reads ACL LOG: every refusal, as "user reason object context".
func (s *ACLRedis) Denials(t testing.TB) []string {
	t.Helper()
	res, err := s.Root.Do(context.Background(), "ACL", "LOG").Slice()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range res {
		m := map[string]any{}
		switch v := e.(type) {
		case map[any]any:
			for k, x := range v {
				m[fmt.Sprint(k)] = x
			}
		case []any:
			for i := 0; i+1 < len(v); i += 2 {
				m[fmt.Sprint(v[i])] = v[i+1]
			}
		}
		out = append(out, fmt.Sprintf("%v %v %v %v", m["username"], m["reason"], m["object"], m["context"]))
	}
	return out
}
