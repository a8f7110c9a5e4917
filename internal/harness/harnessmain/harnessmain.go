// Package harnessmain is what the harness programs (bin/demo, bin/bench)
// share with bin/master's commands: the config loaded as the master loads
// it (exit 2 naming the key on a bad one), its logger made the default,
// and the --slave-binary flag (master/slaveproc.Find reads it).
package harnessmain

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/shared/clientlog"
	"github.com/redcrawl/redcrawl/shared/config"
)

// Setup parses a program's flags, loads the config at *cfgPath and makes
// its logger the default (and the Redis client's and the MySQL driver's,
// rate-limited); cfg is nil when the program is over, with the exit
// status: 0 after --help, 2 after a bad flag or a bad config.
func Setup(f *cli.Flags, prog string, args []string, cfgPath *string, stderr io.Writer) (cfg *config.Config, log *slog.Logger, exit int) {
	if code, ok := f.Parse(args); !ok {
		return nil, nil, code
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return nil, nil, config.ExitCode(err)
	}
	log = cfg.NewLogger(stderr)
	slog.SetDefault(log)
	clientlog.InstallRedis(log)
	store.InstallDriverLogger(log)
	return cfg, log, 0
}

// SlaveBinaryFlag adds --slave-binary.
func SlaveBinaryFlag(f *cli.Flags) *string {
	return f.String("slave-binary", "", "the slave binary the slaves are processes of (default: the slave beside this program)")
}
