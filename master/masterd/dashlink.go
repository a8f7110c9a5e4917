package masterd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redcrawl/redcrawl/master/internal/admin"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
)

// DashboardURL is the URL of the dashboard that admin.listen serves: https
// with admin.tls_cert, and a wildcard host (":8080", "0.0.0.0:8080") as
// loopback.
func DashboardURL(cfg *config.Config) (string, error) {
	if cfg.Admin.Listen == "" {
		return "", errors.New("admin.listen is empty: the master serves no dashboard")
	}
	host, port, err := net.SplitHostPort(cfg.Admin.Listen)
	if err != nil {
		return "", fmt.Errorf("admin.listen %q: %w", cfg.Admin.Listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	scheme := "http"
	if cfg.Admin.TLSCert != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/", nil
}

// DashboardLink is a one-time login link to the dashboard (bin/master
// dashboard-link), valid for ttl: the master exchanges it once for the
// login cookie.
func DashboardLink(cfg *config.Config, ttl time.Duration) (string, error) {
	base, err := DashboardURL(cfg)
	if err != nil {
		return "", err
	}
	return admin.LoginLink(base, cfg.Admin.Token, ttl, time.Now())
}

// RevokeDashboardSessions ends every login session of the crawl's
// dashboard (bin/master dashboard-link --revoke-all): a new session epoch
// in Redis, which every master serving the dashboard reads within
// admin.SessionRefresh. A crawl Redis does not hold is an
// *UnknownCrawlError, and nothing is written.
func RevokeDashboardSessions(ctx context.Context, cfg *config.Config) error {
	rdb, err := redisconn.New(cfg)
	if err != nil {
		return err
	}
	defer rdb.Close()
	ok, err := frontier.CrawlExists(ctx, rdb, cfg.Crawl.Name)
	if err == nil && !ok {
		known, lerr := Crawls(ctx, rdb, nil)
		if lerr != nil {
			return onceErr(frontier.RedisServer(cfg), lerr)
		}
		return &UnknownCrawlError{Crawl: cfg.Crawl.Name, Known: known}
	}
	if err == nil {
		err = frontier.NewSessions(rdb, cfg.Crawl.Name).RevokeAll(ctx)
	}
	return onceErr(frontier.RedisServer(cfg), err)
}
