package frontier

import (
	"errors"
	"strings"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/retry"
	"github.com/redcrawl/redcrawl/shared/secret"
)

// RedisServer describes the config's Redis for retry.Start: what to check
// when it refuses the credentials or cannot be reached, and how long to
// wait (redis.startup_timeout).
func RedisServer(cfg *config.Config) retry.Server {
	check := "redis.url's user and password"
	if cfg.Redis.PasswordFile != "" {
		check = "redis.url's user and redis.password_file"
	}
	return retry.Server{
		What:       "redis",
		Addr:       secret.URL(cfg.Redis.URL),
		Check:      check + " (and the user's ACL rules: bin/master acl)",
		Reach:      "redis.url, and that Redis runs and listens there",
		TimeoutKey: "redis.startup_timeout",
		Timeout:    cfg.Redis.StartupTimeout,
		Refused:    IsRefused,
		// a slave started before its master waits for the library
		Answered: func(err error) bool { return errors.Is(err, ErrNoLibrary) },
	}
}

// IsRefused reports an error of a Redis that refuses this client whatever
// the wait: credentials (WRONGPASS, NOAUTH, a password the server has no
// use for) or an ACL user without the commands or keys it needs (NOPERM).
func IsRefused(err error) bool {
	if err == nil || errors.Is(err, ErrNoLibrary) {
		return false
	}
	s := err.Error()
	for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "ERR AUTH", "invalid password", "invalid username-password"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}
