package store

import (
	"errors"
	"log/slog"

	"github.com/go-sql-driver/mysql"

	"github.com/redcrawl/redcrawl/shared/clientlog"
)

// errAccessDeniedNoPassword is ER_ACCESS_DENIED_NO_PASSWORD_ERROR (a user
// that must log in another way, such as unix_socket).
const errAccessDeniedNoPassword = 1698

// IsRefused reports an error of a MySQL server that refuses this user
// whatever the wait: credentials, or rights it lacks (on the database, a
// table, or the creation of the database). Open's errors wrap it.
func IsRefused(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case errAccessDenied, errDBAccessDenied, errSpecificAccessDenied, errTableAccessDenied, errAccessDeniedNoPassword:
		return true
	}
	return false
}

// InstallDriverLogger routes the MySQL driver's log lines to log,
// rate-limited (shared/clientlog): a main calls it once.
func InstallDriverLogger(log *slog.Logger) {
	mysql.SetLogger(clientlog.New(log, "mysql", clientlog.Every))
}
