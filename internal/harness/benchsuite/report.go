package benchsuite

import (
	"fmt"
	"html"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// notes explain what the report's rows measure.
var notes = []string{
	"Every crawl fetches the same synthetic site (internal/harness/testsite) served by this process on 127.0.0.2…; colly runs first, then redcrawl with each slave count, each with a fresh crawl name.",
	"to 99% of the site: from seeding to the fetch that made 99% of the site's expected pages (MySQL pages.fetched_at; colly: its responses to expected URLs); pages/s to 99% = those pages / that time, so a slow start counts and a straggler at the end does not.",
	"seeding → first fetch: from the seeding call (colly: the first Visit) to the first page's fetch; redcrawl's includes starting the master and the slave processes.",
	"first fetch → 90% of the median rate: the fetches in 100 ms bins from the first; the first bin holding 90% of the median bin's count (the last, partial bin left out) ends the ramp.",
	"last page fetched → finished: from the last pages.fetched_at to the master's finish decision (Stats.FinishedAt), with master.quiescence at its default; it includes the last page's processing and ack.",
	"seconds: from seeding to the last page's fetch (pages.fetched_at in MySQL, to the millisecond; the master's finish decision, less its quiescence window, when that is earlier) (colly: Visit to Wait); pages/s = pages / seconds.",
	"CPU per 1,000 pages: slaves' own = utime+stime of the slave processes from /proc/<pid>/stat (subprocesses only); this process = getrusage delta, which includes the site's serving, the master and the sampler (and the slaves when in-process). colly's figure includes the site's serving too.",
	"peak RSS: VmHWM of the slave processes, max over slaves (subprocesses only). colly RSS growth: peak VmRSS of this process sampled every 500 ms minus VmRSS before the crawl.",
	"Redis calls/page: INFO commandstats calls delta (commands run inside scripts counted too, this suite's own monitoring commands taken off). Round trips/page: commands and scripts sent, counted by a go-redis hook on the clients this suite creates; with subprocess slaves, the slaves' share is their function calls (commandstats fcall, fcall_ro) and their few plain commands (heartbeats) are not counted. Both are server-wide: another client of the same Redis inflates the server-side figures (calls, scripts with subprocesses, CPU).",
	"Redis CPU: INFO used_cpu_sys+used_cpu_user delta per 1,000 pages; peak core share: max over 1 s samples of CPU delta / wall time.",
	"MySQL CPU: utime+stime of the local mariadbd/mysqld processes from /proc/<pid>/stat (n/a when MySQL is not local; every client's work, like Redis's). All-in CPU: slaves' own + this process (master, site, sampler) + Redis + MySQL, s per 1,000 pages = ms a page; the site's serving makes it an upper bound (bench --broad runs the master as a process and leaves the site out).",
	"Redis bytes per seen URL: MEMORY USAGE of the crawl's seen buckets (up to MaxSeenSample measured, scaled) / URLs seen, at the end. Per queued URL: MEMORY USAGE of the per-host queue lists / their length at the largest queue probed (probes as the queue grows 20%); growth per queued URL: used_memory at that probe minus before seeding, / queued — it includes the seen set, leases and the event stream, so it is an upper bound.",
	"MySQL rows/s: rows of pages and exceptions for the crawl / seconds.",
	"missing / extra: the site's own request log against its expected fetches (each page exactly once); extra counts repeats and requests for URLs that do not exist.",
	"colly-callback slave: a program of slave/collyslave (make bench: internal/harness/benchsuite/collybench) whose collector Visits every a[href], crawled by as many slaves as the stock slave's column of the same count, under the same config; its CPU includes the slave's own pass over each page (charset, robots meta) besides colly's parsing and callbacks.",
}

func fmtF(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func fmtMiB(b int64) string {
	if b < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", float64(b)/(1<<20))
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var sb strings.Builder
	o := r.Options
	mode := "in this process"
	if o.SlaveBinary != "" {
		mode = "subprocesses (" + o.SlaveBinary + ")"
	}
	fmt.Fprintf(&sb, "# redcrawl crawl benchmark, %s\n\n", r.Date.Format("2006-01-02 15:04:05 MST"))
	fmt.Fprintf(&sb, "- machine: %s, %d CPUs (runtime.NumCPU), %s\n", r.CPUModel, r.NumCPU, r.GoVersion)
	fmt.Fprintf(&sb, "- site: %d hosts × %d pages (%d expected fetches), ~%d bytes per page, %d links per page%s, loopback\n",
		o.Hosts, o.PagesPerHost, r.ExpectedURLs, o.PageBytes, o.LinksPerPage, failingNote(o.FailingHosts))
	fmt.Fprintf(&sb, "- crawlers: %d fetches in flight per slave (colly: in all), %d per host, delay 0, robots off, content dedup on, WARC and rendering off; slaves %s; slave.idle_poll %v, master quiescence %v (taken off)\n",
		o.Concurrency, o.HostConcurrency, mode, o.Config.Slave.IdlePoll, Quiescence)
	fmt.Fprintf(&sb, "- Redis %s at %s; MySQL %s\n\n", r.RedisVersion, redisHost(o.Config.Redis.URL), dsnHost(o.Config.MySQL.DSN))

	cols := []string{"colly"}
	runs := r.columns()
	for _, run := range runs {
		cols = append(cols, runName(run))
	}
	sb.WriteString("| metric | " + strings.Join(cols, " | ") + " |\n|---|" + strings.Repeat("---:|", len(cols)) + "\n")
	c := r.Colly
	row := func(name, colly string, f func(*RunResult) string) {
		cells := []string{colly}
		for _, run := range runs {
			cells = append(cells, f(run))
		}
		sb.WriteString("| " + name + " | " + strings.Join(cells, " | ") + " |\n")
	}
	row("pages", fmt.Sprint(c.Pages), func(x *RunResult) string { return fmt.Sprint(x.Pages) })
	row("seconds", fmtF(c.Seconds, 1), func(x *RunResult) string { return fmtF(x.Seconds, 1) })
	row("pages/s", fmtF(c.PagesPerSec, 0), func(x *RunResult) string { return fmtF(x.PagesPerSec, 0) })
	row("× colly pages/s", "1.00", func(x *RunResult) string { return fmtF(x.VsColly, 2) })
	row("seconds to 99% of the site", fmtF(c.To99Seconds, 2), func(x *RunResult) string { return fmtF(x.To99Seconds, 2) })
	row("pages/s to 99% of the site", fmtF(c.PagesPerSec99, 0), func(x *RunResult) string { return fmtF(x.PagesPerSec99, 0) })
	row("× colly pages/s to 99%", "1.00", func(x *RunResult) string { return fmtF(x.VsColly99, 2) })
	row("seeding → first fetch, s", fmtF(c.FirstFetch, 2), func(x *RunResult) string { return fmtF(x.FirstFetch, 2) })
	row("first fetch → 90% of the median rate (100 ms bins), s", fmtF(c.RampSeconds, 1), func(x *RunResult) string { return fmtF(x.RampSeconds, 1) })
	row("last page fetched → finished, s", "–", func(x *RunResult) string { return fmtF(x.FinishLag, 2) })
	row("CPU s / 1,000 pages, slaves' own", "n/a", func(x *RunResult) string { return fmtF(x.SlaveCPUPer1k, 2) })
	row("CPU s / 1,000 pages, this process", fmtF(c.CPUPer1k, 2), func(x *RunResult) string { return fmtF(x.ProcessCPUPer1k, 2) })
	row("slave peak RSS, MiB (max over slaves)", "n/a", func(x *RunResult) string { return fmtMiB(x.SlavePeakRSS) })
	row("slave RSS, first → last 10% of the crawl, MiB", "n/a", func(x *RunResult) string {
		if x.SlaveRSSFirst <= 0 || x.SlaveRSSLast <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("%s → %s (%+.0f%%)", fmtMiB(x.SlaveRSSFirst), fmtMiB(x.SlaveRSSLast),
			100*(float64(x.SlaveRSSLast)/float64(x.SlaveRSSFirst)-1))
	})
	row("RSS growth, MiB", fmtMiB(c.RSSGrowth), func(*RunResult) string { return "n/a" })
	row("Redis calls / page (server, in scripts too)", "–", func(x *RunResult) string { return fmtF(x.RedisCallsPerPage, 1) })
	row("Redis round trips / page (client)", "–", func(x *RunResult) string { return fmtF(x.RoundTripsPerPage, 2) })
	row("Redis scripts / page", "–", func(x *RunResult) string { return fmtF(x.ScriptsPerPage, 2) })
	row("Redis CPU s / 1,000 pages", "–", func(x *RunResult) string { return fmtF(x.RedisCPUPer1k, 3) })
	row("MySQL CPU s / 1,000 pages (local mariadbd)", "–", func(x *RunResult) string { return fmtF(x.MySQLCPUPer1k, 3) })
	row("all-in CPU ms / page (slaves, this process, Redis, MySQL)", "–", func(x *RunResult) string { return fmtF(x.AllInPer1k, 3) })
	row("Redis peak share of one core", "–", func(x *RunResult) string { return fmtF(x.RedisPeakCore, 2) })
	row("Redis bytes / seen URL", "–", func(x *RunResult) string { return fmtF(x.SeenBytesPerURL, 1) })
	row("Redis bytes / queued URL (queue lists)", "–", func(x *RunResult) string { return fmtF(x.QueuedBytesPerURL, 1) })
	row("Redis used_memory growth / queued URL", "–", func(x *RunResult) string { return fmtF(x.QueuedGrowthPerURL, 0) })
	row("peak queued URLs", "–", func(x *RunResult) string { return fmt.Sprint(x.PeakQueued) })
	row("MySQL rows / s (pages + exceptions)", "–", func(x *RunResult) string { return fmtF(x.MySQLRowsPerSec, 0) })
	row("fetches missing / extra", fmt.Sprintf("%d / %d", c.Missing, c.Extra),
		func(x *RunResult) string { return fmt.Sprintf("%d / %d", x.Missing, x.Extra) })
	row("failed tasks / lost leases (colly: errors)", fmt.Sprint(c.Errors),
		func(x *RunResult) string { return fmt.Sprintf("%d / %d", x.Failed, x.Lost) })
	fmt.Fprintf(&sb, "\n2-slave / 1-slave throughput: %s\n\n", fmtF(r.TwoToOne, 2))
	r.collyMarkdown(&sb)
	if r.Options.Rounds > 1 {
		fmt.Fprintf(&sb, "%d rounds; each column is its median round (by its ratio to colly in that round). Per round:\n\n", r.Options.Rounds)
		for _, n := range r.Options.Slaves {
			fmt.Fprintf(&sb, "- %d slave(s) × colly: %s\n", n, fmtList(r.VsColly[n]))
		}
		if len(r.TwoToOneRounds) > 0 {
			fmt.Fprintf(&sb, "- 2 / 1 slaves: %s (median %s)\n", fmtList(r.TwoToOneRounds), fmtF(r.TwoToOne, 2))
		}
		sb.WriteString("\n")
	}
	if len(r.APIRuns) > 0 {
		r.apiMarkdown(&sb)
	}
	if r.SVGPath != "" {
		fmt.Fprintf(&sb, "![pages/s over time](%s)\n\n", filepath.Base(r.SVGPath))
	}
	sb.WriteString("Notes:\n\n")
	for _, n := range notes {
		sb.WriteString("- " + n + "\n")
	}
	return sb.String()
}

// columns are the report's crawls after colly's: the stock slave's, then
// the colly-callback slaves'.
func (r *Report) columns() []*RunResult {
	return append(append([]*RunResult(nil), r.Runs...), r.CollyRuns...)
}

// runName names a crawl's column: "2 slaves", "1 colly-callback slave".
func runName(run *RunResult) string {
	if run.Colly {
		return fmt.Sprintf("%d colly-callback slave%s", run.Slaves, plural(run.Slaves))
	}
	return fmt.Sprintf("%d slave%s", run.Slaves, plural(run.Slaves))
}

// collyMarkdown writes the colly-callback slaves against the stock
// slave's, and the sizes of Options.Sizes.
func (r *Report) collyMarkdown(sb *strings.Builder) {
	if len(r.CollyRuns) > 0 {
		sb.WriteString("Colly callbacks in the slave (slave/collyslave; the collector Visits every a[href] like the colly crawl), against the stock slave with as many slaves in the same round (median of the rounds):\n\n")
		for _, run := range r.CollyRuns {
			vs := r.CollyVsStock[run.Slaves]
			fmt.Fprintf(sb, "- %s: %s× the stock slave's pages/s; %s× its slave CPU per page (%s vs %s s / 1,000 pages)",
				runName(run), fmtF(vs.PagesPerSec, 2), fmtF(vs.CPU, 2), fmtF(run.SlaveCPUPer1k, 2), fmtF(run.SlaveCPUPer1k/vs.CPU, 2))
			if rs := r.CollyVsStockRounds[run.Slaves]; len(rs) > 1 {
				var ps, cs []float64
				for _, x := range rs {
					ps, cs = append(ps, x.PagesPerSec), append(cs, x.CPU)
				}
				fmt.Fprintf(sb, "; rounds: pages/s %s, CPU %s", fmtList(ps), fmtList(cs))
			}
			sb.WriteString("\n")
		}
		sb.WriteString("\n")
	}
	if len(r.Options.Sizes) > 0 {
		sb.WriteString("Binary sizes:\n\n")
		for _, sz := range r.Options.Sizes {
			fmt.Fprintf(sb, "- %s: %s MiB (%s, %d bytes)\n", sz.Label, fmtMiB(sz.Bytes), sz.Path, sz.Bytes)
		}
		sb.WriteString("\n")
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// dsnHost returns the address part of a MySQL DSN, without credentials.
func dsnHost(dsn string) string {
	if i := strings.LastIndexByte(dsn, '@'); i >= 0 {
		dsn = dsn[i+1:]
	}
	if i := strings.IndexByte(dsn, '?'); i >= 0 {
		dsn = dsn[:i]
	}
	return dsn
}

// redisHost returns a Redis URL without its credentials.
func redisHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "?"
	}
	u.User = nil
	return u.String()
}

// write writes the Markdown report, the chart and latest.md.
func (r *Report) write(dir, stamp string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("benchsuite: %w", err)
	}
	r.SVGPath = filepath.Join(dir, "bench-"+stamp+".svg")
	r.MarkdownPath = filepath.Join(dir, "bench-"+stamp+".md")
	r.LatestPath = filepath.Join(dir, "latest.md")
	if err := os.WriteFile(r.SVGPath, []byte(r.SVG()), 0o644); err != nil {
		return fmt.Errorf("benchsuite: %w", err)
	}
	md := []byte(r.Markdown())
	if err := os.WriteFile(r.MarkdownPath, md, 0o644); err != nil {
		return fmt.Errorf("benchsuite: %w", err)
	}
	if err := os.WriteFile(r.LatestPath, md, 0o644); err != nil {
		return fmt.Errorf("benchsuite: %w", err)
	}
	return nil
}

// chart geometry.
const (
	svgW, svgH                     = 860, 440
	padL, padR, padT, padB float64 = 70, 150, 40, 55
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"}

// SVG draws pages/s over time, one line per crawl.
func (r *Report) SVG() string {
	type line struct {
		name  string
		color string
		dash  string
		pts   []Point2
	}
	var lines []line
	if r.Colly != nil {
		lines = append(lines, line{"colly", "#555555", "6,4", rates(r.Colly.Series)})
	}
	for i, run := range r.columns() {
		dash := ""
		if run.Colly {
			dash = "2,3"
		}
		lines = append(lines, line{runName(run), palette[i%len(palette)], dash, rates(run.Series)})
	}
	maxX, maxY := 1.0, 1.0
	for _, l := range lines {
		for _, p := range l.pts {
			maxX, maxY = max(maxX, p.X), max(maxY, p.Y)
		}
	}
	maxX, maxY = niceCeil(maxX), niceCeil(maxY*1.05)
	pw, ph := svgW-padL-padR, svgH-padT-padB
	x := func(v float64) float64 { return padL + v/maxX*pw }
	y := func(v float64) float64 { return padT + ph - v/maxY*ph }

	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgW, svgH, svgW, svgH)
	fmt.Fprintf(&sb, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&sb, `<text x="%g" y="22" font-size="15">%s</text>`+"\n", padL,
		html.EscapeString(fmt.Sprintf("redcrawl vs colly: pages/s over time (%d-sample window), %s", ChartWindow, r.Date.Format("2006-01-02 15:04"))))
	for i := 0; i <= 5; i++ {
		vx, vy := maxX*float64(i)/5, maxY*float64(i)/5
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", padL, y(vy), padL+pw, y(vy))
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, y(vy)+4, tick(vy))
		fmt.Fprintf(&sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`+"\n", x(vx), padT, x(vx), padT+ph)
		fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x(vx), padT+ph+18, tick(vx))
	}
	fmt.Fprintf(&sb, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", padL, padT+ph, padL+pw, padT+ph)
	fmt.Fprintf(&sb, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`+"\n", padL, padT, padL, padT+ph)
	fmt.Fprintf(&sb, `<text x="%g" y="%g" text-anchor="middle">time since start (s)</text>`+"\n", padL+pw/2, float64(svgH)-12)
	fmt.Fprintf(&sb, `<text transform="translate(18 %g) rotate(-90)" text-anchor="middle">pages/s</text>`+"\n", padT+ph/2)
	for i, l := range lines {
		if len(l.pts) > 0 {
			var pts []string
			for _, p := range l.pts {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.X), y(p.Y)))
			}
			dash := ""
			if l.dash != "" {
				dash = ` stroke-dasharray="` + l.dash + `"`
			}
			fmt.Fprintf(&sb, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", l.color, dash, strings.Join(pts, " "))
		}
		ly := padT + 10 + float64(i)*20
		fmt.Fprintf(&sb, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="3"/>`+"\n", padL+pw+15, ly, padL+pw+40, ly, l.color)
		fmt.Fprintf(&sb, `<text x="%g" y="%g">%s</text>`+"\n", padL+pw+46, ly+4, html.EscapeString(l.name))
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func tick(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// fmtList formats ratios as "1.21, 1.40, 1.33".
func fmtList(xs []float64) string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmtF(x, 2)
	}
	return strings.Join(out, ", ")
}

// apiMarkdown renders the comparison of work API slaves with direct ones.
func (r *Report) apiMarkdown(sb *strings.Builder) {
	sb.WriteString("## Slaves of the work API\n\n")
	sb.WriteString("Each slave count crawled again, after its direct crawl in odd rounds (the first, the third, …) and before it in even ones, with slaves of the master's work API " +
		"(HTTPS on loopback, a token each, no Redis or MySQL address): the master runs the frontier's functions for them. " +
		"Each column is the round with the median API/direct ratio.\n\n")
	var cols []string
	for _, run := range r.APIRuns {
		cols = append(cols, fmt.Sprintf("%d slave%s: direct", run.Slaves, plural(run.Slaves)), "API")
	}
	sb.WriteString("| metric | " + strings.Join(cols, " | ") + " |\n|---|" + strings.Repeat("---:|", len(cols)) + "\n")
	row := func(name string, f func(*RunResult) string) {
		var cells []string
		for k, run := range r.APIRuns {
			cells = append(cells, f(r.APIDirectRuns[k]), f(run))
		}
		sb.WriteString("| " + name + " | " + strings.Join(cells, " | ") + " |\n")
	}
	row("pages/s", func(x *RunResult) string { return fmtF(x.PagesPerSec, 0) })
	row("pages/s to 99% of the site", func(x *RunResult) string { return fmtF(x.PagesPerSec99, 0) })
	row("seeding → first fetch, s", func(x *RunResult) string { return fmtF(x.FirstFetch, 2) })
	row("first fetch → 90% of the median rate (100 ms bins), s", func(x *RunResult) string { return fmtF(x.RampSeconds, 1) })
	row("CPU s / 1,000 pages, slaves' own", func(x *RunResult) string { return fmtF(x.SlaveCPUPer1k, 2) })
	row("CPU s / 1,000 pages, this process (master, site)", func(x *RunResult) string { return fmtF(x.ProcessCPUPer1k, 2) })
	row("Redis CPU s / 1,000 pages", func(x *RunResult) string { return fmtF(x.RedisCPUPer1k, 3) })
	row("work API requests / page", func(x *RunResult) string { return fmtF(x.APIRequestsPerPage, 2) })
	row("master's time per claim request, ms", func(x *RunResult) string { return fmtF(x.APIClaimMs, 2) })
	row("fetches missing / extra", func(x *RunResult) string { return fmt.Sprintf("%d / %d", x.Missing, x.Extra) })
	sb.WriteString("\nAPI / direct pages/s per round:\n\n")
	for _, n := range r.Options.Slaves {
		xs := r.APIVsDirect[n]
		fmt.Fprintf(sb, "- %d slave(s): %s (median %s)\n", n, fmtList(xs), fmtF(median(xs), 2))
	}
	sb.WriteString("\n")
}

// failingNote describes the failing hosts (Options.FailingHosts), "" when
// none.
func failingNote(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(", %d host(s) with a URL that always answers 503 (Retry-After: 2)", n)
}
