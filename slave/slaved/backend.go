package slaved

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/metrics"
	"github.com/redcrawl/redcrawl/shared/ratelog"
	"github.com/redcrawl/redcrawl/shared/redisconn"
	"github.com/redcrawl/redcrawl/shared/retry"
	"github.com/redcrawl/redcrawl/slave/workclient"
)

// openBackend opens the frontier the slave works with: Options.Backend
// (tests), the master's work API (slave.api.urls: a slave on a machine you
// do not trust, with a token and no Redis credential), or Redis (a direct
// slave). It waits for it to be reachable (Redis: up to
// redis.startup_timeout), and returns what closes it, or nil when ctx ended
// first; an error is one no wait mends (a token the master refuses, Redis
// refusing the credentials) or a Redis not reached in time.
func (s *Slave) openBackend(ctx context.Context) (func(), error) {
	if s.opt.Backend != nil {
		s.front = s.opt.Backend
		return func() {}, nil
	}
	if api := s.cfg.Slave.API; len(api.URLs) > 0 {
		return s.openAPI(ctx, api)
	}
	closeRedis := func() {}
	if s.opt.Redis != nil {
		s.rdb = s.opt.Redis
	} else {
		rdb, err := redisconn.New(s.cfg)
		if err != nil {
			return nil, fmt.Errorf("slave: %w", err)
		}
		s.rdb = rdb
		closeRedis = func() { rdb.Close() }
	}
	var f *frontier.Redis
	err := retry.Start(ctx, s.rl, frontier.RedisServer(s.cfg), func(wctx context.Context) error {
		var err error
		opt := frontier.OptionsFromConfig(s.cfg)
		opt.Slave = s.id
		f, err = frontier.NewRedis(wctx, s.rdb, opt)
		return err
	})
	if err != nil {
		closeRedis()
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, err // refused, or not reachable within redis.startup_timeout
	}
	if d := f.SettingsDiffer(); len(d) > 0 {
		s.log.Warn("this slave's config differs from the crawl's settings, which its master wrote; the crawl's apply",
			"settings", strings.Join(d, ","))
	}
	s.front = f
	return closeRedis, nil
}

// openAPI connects to the first master of slave.api.urls that answers,
// with the slave's token: the token must be this slave's (its id) and its
// crawl's.
func (s *Slave) openAPI(ctx context.Context, api config.SlaveAPI) (func(), error) {
	token, err := config.ReadSecretFile("slave.api.token_file", api.TokenFile)
	if err != nil {
		return nil, fmt.Errorf("slave: %w", err)
	}
	tlsCfg, err := s.cfg.SlaveAPITLSConfig()
	if err != nil {
		return nil, fmt.Errorf("slave: %w", err)
	}
	want := s.id
	if !s.idGiven {
		want = "" // the token's
	}
	var c *workclient.Client
	var fatal error
	err = retry.Until(ctx, s.rl, "work API", func() error {
		var err error
		c, err = workclient.New(ctx, workclient.Options{URLs: api.URLs, Token: strings.TrimSpace(token), TLS: tlsCfg,
			Crawl: s.cfg.Crawl.Name, Slave: want})
		if errors.Is(err, workclient.ErrToken) {
			fatal = err
			return nil
		}
		return err
	})
	if fatal != nil {
		return nil, fmt.Errorf("slave: %w (a token is made for one slave id and crawl: bin/master token issue --slave ID; run bin/slave with that --id, or none)", fatal)
	}
	if err != nil {
		return nil, nil
	}
	if c.Slave() != s.id {
		// no id given: the slave is the token's
		s.id = c.Slave()
		s.log = s.opt.Logger.With("slave", s.id)
		s.rl = ratelog.New(s.log, 30*time.Second)
		s.met = metrics.NewSlave(s.cfg.Crawl.Name, s.id)
	}
	s.log.Info("working through the master's work API", "library", c.Hello().Library, "shards", c.Hello().Shards)
	s.front = c
	return c.Close, nil
}
