// Package sitecrawl is master crawl: one command that crawls a site. It
// seeds the crawl, runs a master in this process and slaves as processes
// of the slave binary (master/slaveproc: bin/master links no slave), all
// with --exit-when-done, shows a live progress line, writes the crawl's
// items to a file, and prints the crawl's stats. It uses the configured
// Redis, MySQL and rule files as a distributed crawl does, so a crawl
// that outgrows one machine continues with master run and slave run.
//
// StartLocal is that sequence on its own (seed, write the slaves'
// config, run the master with exit-when-done, start the slaves), which
// the demo and the bench run their crawls through too.
package sitecrawl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/redcrawl/redcrawl/master/masterd"
	"github.com/redcrawl/redcrawl/master/slaveproc"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/redisconn"
)

// Options say what to crawl and where the output goes.
type Options struct {
	Seeds       []string // the start URLs
	Slaves      int      // slave processes; default 2
	SlaveBinary string   // the slave binary (slaveproc.Binary)
	// Out, when set, receives the crawl's items, in the format of its
	// extension (masterd.FormatOfPath); ItemFields, when set, makes the
	// rows flat (masterd.ExportOptions.Fields).
	Out        string
	ItemFields []string
	// Append adds the items this run stored (new, or updated by a fetch
	// again) to Out instead of replacing it with every item of the crawl
	// (masterd.OpenExport).
	Append bool
	// Fresh drops the crawl first (masterd.DropCrawl: its Redis keys and
	// MySQL rows), refusing while its slaves or master run.
	Fresh  bool
	Logger *slog.Logger // the master's log; default slog.Default()
	// Stdout receives the progress, the output file's count and the
	// summary; SlaveOutput the slaves' logs (nil: discarded).
	Stdout      io.Writer
	SlaveOutput io.Writer
	// Stop stops the crawl gracefully when it receives (the first Ctrl-C
	// or SIGTERM of master crawl): the slaves finish or hand back their
	// pages and leave, the master stores every event in MySQL, Out is
	// written. ctx ending stops it at once: the slaves are killed, and Run
	// returns without waiting for the master (the process is ending).
	Stop <-chan struct{}
	// Terminal draws the progress as a bar redrawn in place; otherwise a
	// plain line is printed every ProgressEvery (default 5s).
	Terminal      bool
	ProgressEvery time.Duration
}

// Result is what a crawl did.
type Result struct {
	Seed    masterd.SeedResult
	Stats   masterd.CrawlStats // the whole crawl's, after this run
	Fetched int64              // page rows this run added
	Items   int                // items written to Options.Out
	// Interrupted: the crawl was stopped before it finished (Options.Stop,
	// or ctx); it stays in Redis and MySQL, and the same run again goes
	// on. AtOnce: by ctx, without storing the events or writing Out.
	Interrupted, AtOnce bool
	// InFlightAtStop is the pages in flight when Options.Stop came: the
	// most that are fetched again when the crawl goes on.
	InFlightAtStop int64
}

// CheckOptions reports what is wrong with opt before anything runs (bad
// usage).
func CheckOptions(opt Options) error {
	if len(opt.Seeds) == 0 {
		return errors.New("no start URLs (give them as arguments)")
	}
	if opt.Slaves < 0 || opt.Slaves > 64 {
		return fmt.Errorf("--slaves %d: want 1 to 64", opt.Slaves)
	}
	if opt.Out != "" && masterd.FormatOfPath(opt.Out) == "" {
		return fmt.Errorf("-o %s: the extension says the format: .jsonl (JSON Lines), .json or .csv", opt.Out)
	}
	if len(opt.ItemFields) > 0 && opt.Out == "" {
		return errors.New("--item-fields goes with -o FILE")
	}
	if opt.Append && opt.Out == "" {
		return errors.New("--append goes with -o FILE")
	}
	return nil
}

// Run crawls opt.Seeds to the end with a master in this process and
// opt.Slaves slave processes, writes the items to opt.Out and returns
// what happened. An error is a crawl that could not run (Redis or MySQL
// unreachable, a slave that died, an output file that cannot be written).
func Run(ctx context.Context, base *config.Config, opt Options) (Result, error) {
	var res Result
	if err := CheckOptions(opt); err != nil {
		return res, err
	}
	if opt.Slaves == 0 {
		opt.Slaves = 2
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Stdout == nil {
		opt.Stdout = io.Discard
	}
	if opt.ProgressEvery <= 0 {
		opt.ProgressEvery = 5 * time.Second
	}
	cfg := *base
	// no dashboard or work API: they could collide with a master already
	// running on this machine (master run serves them)
	cfg.Admin.Listen, cfg.API.Listen = "", ""
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	runStart := time.Now()
	var out *masterd.ExportFile
	if opt.Out != "" { // before the crawl: a path that cannot be written fails now
		f, err := masterd.OpenExport(opt.Out, masterd.FormatOfPath(opt.Out), opt.Append)
		if err != nil {
			return res, fmt.Errorf("-o: %w", err)
		}
		defer f.Abort()
		out = f
	}

	if opt.Fresh {
		d, err := masterd.DropCrawl(ctx, &cfg, false, false)
		if err != nil {
			return res, fmt.Errorf("--fresh: %w", err)
		}
		fmt.Fprintf(opt.Stdout, "crawl %s: dropped (%d Redis keys, %d MySQL rows)\n", cfg.Crawl.Name, d.Keys, d.Rows)
	}
	before, err := masterd.ReadCrawlStats(ctx, &cfg)
	if err != nil {
		return res, err
	}
	rdb, err := redisconn.New(&cfg)
	if err != nil {
		return res, err
	}
	defer rdb.Close()
	var front *frontier.Redis
	var st0 frontier.Stats
	var start time.Time
	var hostRate float64
	seeded := func(seed masterd.SeedResult) error {
		res.Seed = seed
		fmt.Fprintf(opt.Stdout, "crawl %s: %d seeds added, %d already seen, %d rejected; %d slaves\n",
			cfg.Crawl.Name, seed.Added, seed.Seen, len(seed.Rejected), opt.Slaves)
		for _, r := range seed.Rejected {
			fmt.Fprintf(opt.Stdout, "  rejected %s\n", r)
		}
		if seed.Added+seed.Seen == 0 {
			return errors.New("no start URL was accepted")
		}
		var err error
		if front, err = frontier.NewRedis(ctx, rdb, frontier.OptionsFromConfig(&cfg)); err != nil {
			return fmt.Errorf("crawl: %w", err)
		}
		// the rules before any slave runs: its first pages get their items;
		// the limits too, which the slaves read when they open the crawl
		if _, err := masterd.PublishRules(ctx, &cfg, front); err != nil {
			return err
		}
		if _, _, err := masterd.ApplyLimits(ctx, &cfg, front, nil); err != nil {
			return err
		}
		// what sets the pace: the politeness of the first seed's host
		set, _ := masterd.LoadRules(&cfg) // published above: valid
		if u, err := url.Parse(opt.Seeds[0]); err == nil {
			p := paceOf(&cfg, set, u)
			hostRate = p.perHost()
			fmt.Fprintln(opt.Stdout, p)
		}
		if st0, err = front.Stats(ctx); err != nil {
			return fmt.Errorf("crawl: %w", err)
		}
		start = time.Now()
		return nil
	}
	ids := make([]string, opt.Slaves)
	for i := range ids {
		ids[i] = fmt.Sprintf("local-%d-%d", os.Getpid(), i+1)
	}
	slaveCfg := slaveConfig(cfg)
	run, err := StartLocal(ctx, LocalOptions{Config: &cfg, Seeds: opt.Seeds, Seeded: seeded,
		Master:   masterd.Options{Logger: opt.Logger, ProgressEvery: time.Hour},
		SlaveIDs: ids, SlaveConfig: &slaveCfg,
		Slaves: slaveproc.Options{Binary: opt.SlaveBinary, Output: opt.SlaveOutput,
			StopTimeout: cfg.Slave.ShutdownTimeout + 5*time.Second, ExitWhenDone: true}})
	if err != nil {
		return res, err
	}
	defer func() {
		if !res.AtOnce { // at once: not waiting for the master
			run.Stop()
		}
	}()

	bar := &progress{w: opt.Stdout, terminal: opt.Terminal, start: start, done0: st0.Done, hostRate: hostRate}
	every := opt.ProgressEvery
	if opt.Terminal {
		every = 250 * time.Millisecond
	}
	tick := time.NewTicker(every)
	var stopped chan struct{} // closed once a graceful stop is over
loop:
	for {
		select {
		case <-run.Done():
			break loop
		case <-ctx.Done():
			// at once: the slaves killed, nothing stored or written; their
			// leases go back once the next master finds them dead
			tick.Stop()
			bar.end()
			run.Kill()
			res.Interrupted, res.AtOnce = true, true
			fmt.Fprintf(opt.Stdout, "stopped at once: the pages in flight are fetched again when the crawl goes on "+
				"(the same command again); the events not yet in MySQL are stored then\n")
			return res, nil
		case <-opt.Stop:
			opt.Stop = nil
			if st, err := front.Stats(context.WithoutCancel(ctx)); err == nil {
				res.InFlightAtStop = st.InFlight
			}
			bar.end()
			fmt.Fprintf(opt.Stdout, "stopping: the slaves finish or hand back the %d pages in flight, the master stores "+
				"their events (press Ctrl-C again to stop at once)\n", res.InFlightAtStop)
			stopped = make(chan struct{})
			go func() { run.Stop(); close(stopped) }()
		case <-tick.C:
			if st, err := front.Stats(ctx); err == nil {
				bar.show(st)
			}
		}
	}
	tick.Stop()
	if stopped != nil {
		// the master exits once the slaves left: wait for the rest of
		// the stop, or a second signal
		select {
		case <-stopped:
		case <-ctx.Done():
			run.Kill()
			res.Interrupted, res.AtOnce = true, true
			return res, nil
		}
	}
	if st, err := front.Stats(context.WithoutCancel(ctx)); err == nil && stopped == nil {
		bar.show(st)
	}
	bar.end()
	if err := run.Wait(); err != nil {
		return res, err // a slave died, or the master failed
	}
	res.Interrupted = stopped != nil
	if !res.Interrupted {
		// the slaves see the finish with their next heartbeat and leave
		run.WaitSlaves(3*cfg.Slave.HeartbeatInterval + cfg.Slave.ShutdownTimeout + 10*time.Second)
	}
	run.Stop()
	elapsed := time.Since(start)

	// what remains runs even after an interrupt: the output and the stats
	// of what was fetched
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	if out != nil {
		eopt := masterd.ExportOptions{Crawl: cfg.Crawl.Name, Fields: opt.ItemFields}
		if opt.Append {
			eopt.Since = runStart
		}
		if res.Items, err = out.Write(octx, &cfg, eopt); err != nil {
			return res, fmt.Errorf("-o %s: %w", opt.Out, err)
		}
	}
	res.Stats, err = masterd.ReadCrawlStats(octx, &cfg)
	if err != nil {
		return res, err
	}
	res.Fetched = res.Stats.PageCount() - before.PageCount()
	if before.PageCount() == 0 {
		res.Stats.SetElapsed(elapsed) // the whole crawl is this run: its time, start-up included
	}
	fmt.Fprintln(opt.Stdout)
	res.Stats.Render(opt.Stdout)
	fmt.Fprintf(opt.Stdout, "\nthis run: %d pages fetched in %s", res.Fetched, elapsed.Round(100*time.Millisecond))
	if out != nil && opt.Append {
		fmt.Fprintf(opt.Stdout, "; %d items of this run added to %s", res.Items, opt.Out)
	} else if out != nil {
		fmt.Fprintf(opt.Stdout, "; %d items written to %s", res.Items, opt.Out)
	}
	fmt.Fprintln(opt.Stdout)
	if res.Interrupted {
		fmt.Fprintf(opt.Stdout, "stopped: crawl %s stays in Redis and MySQL; run the same command again to go on "+
			"(or master run and slave run)\n", cfg.Crawl.Name)
	}
	return res, nil
}

// slaveConfig is the config the local slaves load: the crawl's, with the
// master's Redis (no work API) and /metrics on a free loopback port each.
func slaveConfig(cfg config.Config) config.Config {
	cfg.Slave.API.URLs = nil
	if cfg.Slave.MetricsListen != "" {
		if _, port, err := net.SplitHostPort(cfg.Slave.MetricsListen); err != nil || port != "0" {
			cfg.Slave.MetricsListen = "127.0.0.1:0" // several slaves on one machine
		}
	}
	return cfg
}

// Hint says why a crawl may have fetched nothing, from its stats.
func Hint(st masterd.CrawlStats, seed masterd.SeedResult) string {
	switch {
	case st.EndedBy() != "":
		return fmt.Sprintf("crawl %s was ended by its limit %s: run it with a higher one to go on",
			st.Crawl, masterd.LimitString(st.Limits, st.EndedBy()))
	case seed.Added == 0 && seed.Seen > 0:
		return fmt.Sprintf("every start URL was already seen by crawl %s: start it again with --fresh (drops it first), "+
			"crawl under another name (--crawl NAME) or recrawl it (master seed --recrawl --crawl %s)", st.Crawl, st.Crawl)
	case st.Exceptions[events.KindBlocked] > 0:
		return "fetches to private addresses were refused: a site on loopback or an intranet needs fetch.allow_private_networks: true"
	case st.Exceptions[events.KindRobotsDenied] > 0:
		return fmt.Sprintf("robots.txt denied or could not be read (master exceptions --crawl %s --kind robots_denied); a site on loopback or an intranet needs fetch.allow_private_networks: true",
			st.Crawl)
	case len(st.Exceptions) > 0:
		return fmt.Sprintf("see what failed: master exceptions --crawl %s", st.Crawl)
	}
	return "nothing was fetched"
}
