package benchsuite

// The broad bench's all-in CPU (slaves, master, Redis, MySQL) and the
// slaves' claim latency from their /metrics.

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
)

// cpuSnap is the CPU time used so far by each part of a crawl; -1 = not
// measured.
type cpuSnap struct {
	slaves, master, redis, mysql time.Duration
}

// mysqlPids returns the process ids of the local MariaDB or MySQL
// servers (comm mariadbd or mysqld), none when there is none (a remote
// server: its CPU is not measured).
func mysqlPids() []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	var out []int
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		switch strings.TrimSpace(string(b)) {
		case "mariadbd", "mysqld":
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// sumCPU is the CPU time of processes, -1 when there are none or one
// could not be read.
func sumCPU(pids []int) time.Duration {
	if len(pids) == 0 {
		return -1
	}
	var sum time.Duration
	for _, pid := range pids {
		d := procCPU(pid)
		if d < 0 {
			return -1
		}
		sum += d
	}
	return sum
}

// redisCPU is Redis's used_cpu_sys + used_cpu_user (the server process's
// CPU, as /proc/<pid>/stat gives it, but also for a remote Redis).
func redisCPU(ctx context.Context, rdb *redis.Client) time.Duration {
	ri, err := readInfo(ctx, rdb)
	if err != nil {
		return -1
	}
	return time.Duration(ri.cpu * float64(time.Second))
}

// msPerPage is a CPU time difference per page in ms, NaN when either end
// was not measured.
func msPerPage(a, b time.Duration, pages int64) float64 {
	if a < 0 || b < 0 || pages <= 0 {
		return math.NaN()
	}
	return float64(b-a) / float64(time.Millisecond) / float64(pages)
}

// claimHist is the slaves' claim_seconds histograms merged: cumulative
// counts by upper bound.
type claimHist struct {
	bounds []float64
	cum    map[float64]uint64
	count  uint64
}

// ClaimMetric is the slave's histogram of claim round trips.
const ClaimMetric = "redcrawl_slave_claim_seconds"

// scrapeClaims adds the claim histogram of each slave's /metrics (addrs:
// host:port) to h.
func scrapeClaims(ctx context.Context, addrs []string) (*claimHist, error) {
	h := &claimHist{cum: map[float64]uint64{}}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, a := range addrs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "text/plain; version=0.0.4")
		res, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", a, err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(res.Body)
		res.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", a, err)
		}
		fam := fams[ClaimMetric]
		if fam == nil {
			continue
		}
		for _, m := range fam.GetMetric() {
			hg := m.GetHistogram()
			if hg == nil {
				continue
			}
			h.count += hg.GetSampleCount()
			for _, b := range hg.GetBucket() {
				ub := b.GetUpperBound()
				if _, ok := h.cum[ub]; !ok {
					h.bounds = append(h.bounds, ub)
				}
				h.cum[ub] += b.GetCumulativeCount()
			}
		}
	}
	slices.Sort(h.bounds)
	return h, nil
}

// quantile estimates the q-quantile in seconds, linear within the
// bucket that holds it (the histogram's resolution); +Inf when it lies
// beyond the last bound, NaN without samples.
func (h *claimHist) quantile(q float64) float64 {
	if h == nil || h.count == 0 {
		return math.NaN()
	}
	target := q * float64(h.count)
	lo, below := 0.0, uint64(0)
	for _, ub := range h.bounds {
		c := h.cum[ub]
		if float64(c) >= target {
			if math.IsInf(ub, 1) {
				return ub
			}
			if c == below {
				return ub
			}
			return lo + (ub-lo)*(target-float64(below))/float64(c-below)
		}
		lo, below = ub, c
	}
	return math.Inf(1)
}
