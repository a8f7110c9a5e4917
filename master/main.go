// Command master runs and administers a redcrawl crawl.
//
//	master crawl  [--config config.yaml] [--crawl NAME] [--slaves N] [-o items.jsonl|.json|.csv] [--item-fields a,b] [--append] [--fresh] [--max-pages N] [--max-items N] [--max-duration D] URL...
//	master run    [--config config.yaml] [--crawl NAME] [--exit-when-done]
//	master seed   [--config config.yaml] [--crawl NAME] URL... | --file FILE | --recrawl
//	master status [--config config.yaml] [--crawl NAME] [--json]
//	master rules check [--config config.yaml] [DIR]
//	master migrate [--config config.yaml]
//	master export [--config config.yaml] [--crawl NAME] [--rule R] [--item I] [-o FILE] [--format jsonl|json|csv] [--item-fields a,b] [--append]
//	master drop   --crawl NAME [--config config.yaml] [--keep-rows] [--yes] [--force]
//	master exceptions [--crawl NAME] [--since 1h] [--kind K] [--host H] [--slave S] [--json]
//	master lost | slaves [--crawl NAME] [--json]
//	master pause | resume [--crawl NAME]
//	master requeue --failed [--crawl NAME]
//	master drain --slave ID | retire-proxy --proxy URL [--crawl NAME]
//	master acl --crawl NAME [--role slave|master|admin] [--slave ID] [--password-file F]
//	master acl --mysql [...]
//	master dashboard-link [--config config.yaml] [--ttl 10m] | --revoke-all [--crawl NAME]
//	master token issue --slave ID [--out FILE] | revoke --slave ID | list [--crawl NAME]
//
// Each command has its own flags: "master COMMAND -h" prints them and
// exits 0. Exit status: 0 ok, 1 runtime error, 2 bad usage or bad config.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/cli"
	"github.com/redcrawl/redcrawl/shared/clientlog"
	"github.com/redcrawl/redcrawl/shared/config"
)

const usage = `usage: master <command> [flags]

commands:
  crawl URL...
          crawl a site with one command: seeds, a master and --slaves N local slaves
          until the crawl is finished, a progress line, the items to -o FILE (.jsonl,
          .json or .csv; --item-fields a,b for flat rows), then the crawl's stats;
          exit 0 when pages were fetched, 1 when nothing was
  run     supervise the crawl (migrations, lost tasks, slaves, events to MySQL)
  seed    add seed URLs (arguments, or --file FILE with one URL a line, - for stdin),
          recorded in MySQL, then enqueued;
          --recrawl: fetch every recorded page again now, conditionally (docs/operations.md)
  status  show the crawl's counters and stats (--json for machine-readable output)
  rules check [DIR]
          validate the rule files (default rules.dir) without running anything;
          exit 2 with file:line errors
  export  write the crawl's items out of MySQL: -o FILE (.jsonl, .json or .csv, or
          --format), --item-fields a,b for flat rows, --append to add to FILE
  drop --crawl NAME
          remove a crawl: its Redis keys on every shard and its MySQL rows
          (--keep-rows keeps them); asks first unless --yes
  migrate create the database if missing and apply the migrations (as mysql.migrate_dsn's
          user when set, else mysql.dsn's)
  acl --crawl NAME --role slave|master|admin [--slave ID] [--password-file F]
          print the Redis ACL rules of a role of a crawl (one user per slave)
  acl --mysql [--user U] [--host H] [--database D] [--migrate-user M] [--password-file F]
          print the MySQL/MariaDB users and GRANTs of least privilege
  dashboard-link [--ttl 10m] | --revoke-all
          print a one-time login link to the dashboard (a browser, headless or not, or a
          script opens it once and is logged in); --revoke-all ends every dashboard session
  token issue --slave ID [--out FILE] | revoke --slave ID | list
          the work API's tokens: a slave on a machine you do not trust holds one and no
          Redis or MySQL credential (api.listen, slave.api.urls)

admin commands (human tables, --json for JSON):
  exceptions [--since 1h] [--until D] [--kind K] [--host H] [--slave S] [--limit N] [--offset N]
  lost       list lost tasks (leases taken back)
  slaves     list slaves with their last heartbeat
  pause | resume
             stop or restart handing out tasks
  requeue --failed
             put failed tasks back with their attempts reset
  drain --slave ID
             ask a slave to finish its tasks and leave
  retire-proxy --proxy URL
             retire a proxy on every slave

Run "master <command> -h" for the command's flags.
`

// commands are master's commands but the admin commands and acl: each
// reads its own flags from args.
var commands = map[string]func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int{
	"run":     runCmd,
	"crawl":   crawlCmd,
	"seed":    seedCmd,
	"status":  statusCmd,
	"export":  exportCmd,
	"drop":    dropCmd,
	"migrate": migrateCmd,
	"rules":   rulesCmd,
	"token":   tokenCmd,
	// dashboard-link prints a one-time login link to the dashboard
	"dashboard-link": dashboardLinkCmd,
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// the first signal stops the command gracefully; with the handler
	// gone, a second one ends the process at once (a master stopped so
	// loses nothing: its slaves' leases and unstored events stay in Redis)
	defer context.AfterFunc(ctx, stop)()
	cmd, args := args[0], args[1:]
	if _, ok := adminCommands[cmd]; ok {
		return adminCmd(ctx, cmd, args, stdout, stderr)
	}
	switch cmd {
	case "acl":
		return aclCmd(args, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	if c, ok := commands[cmd]; ok {
		return c(ctx, args, stdin, stdout, stderr)
	}
	fmt.Fprintf(stderr, "master: unknown command %q\n\n%s", cmd, usage)
	return 2
}

// configFlags adds the flags of a command that reads the config and a
// crawl: --config, and --crawl over crawl.name.
func configFlags(f *cli.Flags) (cfgPath, crawl *string) {
	return f.ConfigFile("config.yaml", "config file"), f.String("crawl", "", "crawl name (overrides crawl.name)")
}

// setup parses a command's flags, loads the config (with --crawl over
// crawl.name when crawl is not nil) and makes its logger the default; cfg
// is nil when the command is over, with the exit status.
func setup(f *cli.Flags, args []string, cfgPath, crawl *string, stderr io.Writer) (cfg *config.Config, log *slog.Logger, exit int) {
	if code, ok := f.Parse(args); !ok {
		return nil, nil, code
	}
	name := ""
	if crawl != nil {
		name = *crawl
	}
	cfg, code := loadConfig(*cfgPath, name, stderr)
	if cfg == nil {
		return nil, nil, code
	}
	log = cfg.NewLogger(stderr)
	setLogger(log)
	return cfg, log, 0
}

// setLogger makes log the default logger, the Redis client's and the
// MySQL driver's (rate-limited: shared/clientlog).
func setLogger(log *slog.Logger) {
	slog.SetDefault(log)
	clientlog.InstallRedis(log)
	store.InstallDriverLogger(log)
}

// loadConfig loads the config file with crawl (when not "") as
// crawl.name. On an error it prints it and returns the exit status.
func loadConfig(path, crawl string, stderr io.Writer) (*config.Config, int) {
	cfg, err := config.Load(path)
	if err == nil && crawl != "" {
		cfg.Crawl.Name = crawl
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "master: %v\n", err)
		return nil, config.ExitCode(err)
	}
	return cfg, 0
}
