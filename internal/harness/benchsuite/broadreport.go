package benchsuite

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// broadNotes say how the broad bench measures.
const broadNotes = `Notes:

- Every host's root is seeded (with one more page, the held page, which the site answers only once every other
  page is done); host names (h<i>.bench.test) are answered by a DNS server on loopback, the slaves' dns.server,
  with 16 loopback addresses; one HTTP server tells the hosts apart by their Host header.
- pages/s: pages done from the slaves' start (after seeding) to the last page but the held one.
- Redis bytes / host: INFO used_memory after seeding − before, / hosts (one queued URL a host; the seen set of
  dedup.mode exact is in it, and shown apart).
- Redis CPU / page: INFO used_cpu_sys + used_cpu_user from before seeding to the master's exit (seeding and the idle
  tail included).
- Redis functions' Lua heap: INFO used_memory_vm_functions after the idle tail (every function library's, garbage not
  yet collected included; a bigger heap costs every call).
- DNS queries / host and HTTP connections / host: the queries the site's DNS server answered (A and AAAA each) and the
  connections its HTTP servers accepted, / hosts.
- claim p50/p99: the slaves' redcrawl_slave_claim_seconds histograms merged (scraped from their /metrics), linear
  within a bucket (buckets 0.1, 0.25, 0.5, 1, 2.5, 5, 10 ms…).
- idle commands/s: commandstats calls (commands inside functions included) a second while the master and the slaves
  wait on the held page, 1 s after the last other page, this suite's own INFO and HGET calls left out.
- all-in CPU / page: the slave processes (/proc/<pid>/stat), the master (its process: CPU of ` + "`master run`" + ` and
  of the seeding; or, marked *, this whole process: the site and the DNS server too), Redis (INFO) and the local
  mariadbd/mysqld (/proc/<pid>/stat: every client's work, n/a when MySQL is not local), from before seeding to the last
  page but the held one; "with the tail" to the master's exit (the idle window, the held page and the finish).
`

// Markdown renders the broad report.
func (r *BroadReport) Markdown() string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "# redcrawl broad-crawl benchmark, %s\n\n", r.Date.Format("2006-01-02 15:04:05 MST"))
	fmt.Fprintf(&b, "Machine: %s, runtime.NumCPU %d, %s, Redis %s.\n\n", r.CPUModel, r.NumCPU, r.GoVersion, r.RedisVersion)
	fmt.Fprintf(&b, "Site: %d hosts × %d pages of ~%d bytes; total concurrency %d (host concurrency %d, no delay); idle window %v.\n\n",
		o.Hosts, o.PagesPerHost, o.PageBytes, o.Concurrency, o.HostConcurrency, o.IdleWindow)
	runs := append([]*BroadRun(nil), r.Runs...)
	if r.Narrow != nil {
		runs = append(runs, r.Narrow)
	}
	b.WriteString("| metric |")
	for _, x := range runs {
		if x == r.Narrow {
			fmt.Fprintf(&b, " %s |", x.Label)
		} else {
			fmt.Fprintf(&b, " %s slaves × fetches |", x.Label)
		}
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---:|", len(runs)))
	b.WriteString("\n")
	row := func(name string, f func(x *BroadRun) string) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, x := range runs {
			fmt.Fprintf(&b, " %s |", f(x))
		}
		b.WriteString("\n")
	}
	row("hosts × pages", func(x *BroadRun) string { return fmt.Sprintf("%d × %d", x.Hosts, x.PerHost) })
	row("pages (missing, extra)", func(x *BroadRun) string { return fmt.Sprintf("%d (%d, %d)", x.Pages, x.Missing, x.Extra) })
	row("seeding, s", func(x *BroadRun) string { return num(x.SeedSeconds, 2) })
	row("crawl, s", func(x *BroadRun) string { return num(x.Seconds, 2) })
	row("**pages/s**", func(x *BroadRun) string { return "**" + num(x.PagesPerSec, 0) + "**" })
	row("Redis CPU / page, µs", func(x *BroadRun) string { return num(x.RedisCPUPerPageUs, 0) })
	row("Redis functions' Lua heap at the end, KB", func(x *BroadRun) string { return num(x.RedisLuaKB, 0) })
	row("Redis bytes / host after seeding", func(x *BroadRun) string { return num(x.RedisBytesPerHost, 0) })
	row("… of which the seen set", func(x *BroadRun) string { return num(x.SeenBytesPerHost, 0) })
	row("claim p50 / p99, ms", func(x *BroadRun) string {
		return fmt.Sprintf("%s / %s (%d claims)", num(x.ClaimP50Ms, 2), num(x.ClaimP99Ms, 2), x.Claims)
	})
	row("DNS queries / host (A and AAAA each)", func(x *BroadRun) string { return num(x.DNSQueriesPerHost, 2) })
	row("HTTP connections / host", func(x *BroadRun) string { return num(x.ConnsPerHost, 2) })
	row("idle commands/s (function calls/s)", func(x *BroadRun) string {
		return fmt.Sprintf("%s (%s)", num(x.IdleCmdsPerSec, 0), num(x.IdleScriptsPerSec, 0))
	})
	row("CPU / page, ms: slaves", func(x *BroadRun) string { return num(x.SlaveMs, 3) })
	row("… master", func(x *BroadRun) string {
		s := num(x.MasterMs, 3)
		if x.MasterInProcess {
			s += "*"
		}
		return s
	})
	row("… Redis", func(x *BroadRun) string { return num(x.RedisMs, 3) })
	row("… MySQL", func(x *BroadRun) string { return num(x.MySQLMs, 3) })
	row("**all-in CPU / page, ms**", func(x *BroadRun) string { return "**" + num(x.AllInMs, 3) + "**" })
	row("all-in with the idle tail, ms", func(x *BroadRun) string { return num(x.AllInTailMs, 3) })
	b.WriteString("\n")
	if r.Narrow != nil {
		fmt.Fprintf(&b, "Pages/s at %d hosts / at %d hosts (one slave of %d, as many pages): %s.\n\n",
			o.Hosts, o.NarrowHosts, o.Concurrency, num(r.BroadVsNarrow, 2))
	}
	for _, c := range []*CollyBroadRun{r.CollyBroad, r.CollyNarrow} {
		if c != nil {
			fmt.Fprintf(&b, "Plain colly (this process, %d fetches), %d hosts × %d: %s pages/s (each page once), %d responses (%d pages missing, %d repeats, %d errors), this process's CPU (colly, the site, its DNS server) %s ms a page.\n",
				o.Concurrency, c.Hosts, c.PerHost, num(c.PagesPerSec, 0), c.Pages, c.Missing, c.Extra, c.Errors, num(c.CPUMsPerPage, 3))
		}
	}
	if r.CollyBroad != nil && r.CollyNarrow != nil {
		fmt.Fprintf(&b, "Colly's pages/s at %d hosts / at %d hosts: %s.\n", r.CollyBroad.Hosts, r.CollyNarrow.Hosts, num(r.CollyBroadVsNarrow, 2))
	}
	if r.CollyBroad != nil || r.CollyNarrow != nil {
		b.WriteString("\n")
	}
	b.WriteString(broadNotes)
	return b.String()
}

func num(v float64, prec int) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	if math.IsInf(v, 1) {
		return "> 5000"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func (r *BroadReport) write(dir, stamp string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("benchsuite: %w", err)
	}
	r.MarkdownPath = filepath.Join(dir, "broad-"+stamp+".md")
	r.LatestPath = filepath.Join(dir, "broad-latest.md")
	md := []byte(r.Markdown())
	for _, p := range []string{r.MarkdownPath, r.LatestPath} {
		if err := os.WriteFile(p, md, 0o644); err != nil {
			return fmt.Errorf("benchsuite: %w", err)
		}
	}
	return nil
}
