package masterd

import (
	"context"
	"errors"
	"net"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/retry"
)

// MySQLServer describes the config's MySQL for retry.Start: what to check
// when it refuses the user or cannot be reached, and how long to wait
// (mysql.startup_timeout).
func MySQLServer(cfg *config.Config) retry.Server {
	addr := "mysql.dsn's address"
	if mc, err := cfg.MySQLConfig(); err == nil {
		addr = mc.Addr
	}
	check := "mysql.dsn's user and password"
	if cfg.MySQL.PasswordFile != "" {
		check = "mysql.dsn's user and mysql.password_file"
	}
	if cfg.MySQL.MigrateDSN != "" {
		check += ", mysql.migrate_dsn's user and password"
	}
	return retry.Server{
		What:       "mysql",
		Addr:       addr,
		Check:      check + " and the user's grants (bin/master acl --mysql)",
		Reach:      "mysql.dsn's address, and that MySQL runs and listens there",
		TimeoutKey: "mysql.startup_timeout",
		Timeout:    cfg.MySQL.StartupTimeout,
		Refused:    store.IsRefused,
	}
}

// onceErr is, for a command that does not wait (status, seed, export, the
// admin commands), the start-up error that says what to check when err
// comes from a server that refuses the process or cannot be reached; other
// errors are returned as they are.
func onceErr(srv retry.Server, err error) error {
	switch {
	case err == nil:
		return nil
	case srv.Refused(err):
		return &retry.StartError{Server: srv, Err: err}
	case errors.Is(err, frontier.ErrUnavailable) || isDialError(err):
		srv.Timeout = 0
		return &retry.StartError{Server: srv, Err: err, TimeOut: true}
	}
	return err
}

// openStoreOnce is OpenStore for a command that does not wait.
func openStoreOnce(ctx context.Context, cfg *config.Config) (*store.Store, error) {
	st, err := OpenStore(ctx, cfg)
	return st, onceErr(MySQLServer(cfg), err)
}

func isDialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe)
}
