package benchsuite

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// sampler records pages done every SampleEvery and, for a redcrawl crawl,
// Redis's CPU share every RedisSampleEvery and the queue's memory as it
// grows. It runs until its context ends.
type sampler struct {
	start time.Time
	// done returns pages done and URLs queued (colly: queued is 0).
	done func(ctx context.Context) (done, queued int64, err error)
	// slaveRSS, when set, returns the largest VmRSS of the slave
	// processes in bytes.
	slaveRSS func() int64
	// rdb, crawl, hosts and baseMem are set for a redcrawl crawl.
	rdb     redis.UniversalClient
	crawl   string
	hosts   []string
	baseMem int64

	mu          sync.Mutex
	series      []Point
	peakCore    float64
	probes      int
	lastProbe   int64
	peakQueued  int64   // largest queued seen by a sample
	probeQueued int64   // tasks in the queue lists at the largest probe
	probeBytes  int64   // their MEMORY USAGE
	probeGrowth int64   // used_memory − baseMem at that probe
	peakRSS     int64   // VmRSS of this process, max over samples
	lastCPU     float64 // Redis CPU at the last INFO sample
	lastCPUAt   time.Time
}

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(SampleEvery)
	defer t.Stop()
	every := max(1, int(RedisSampleEvery/SampleEvery))
	for i := 0; len(s.series) < maxSamples; i++ {
		s.sample(ctx, i%every == 0)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sample(ctx context.Context, redisToo bool) {
	done, queued, err := s.done(ctx)
	now := time.Now()
	rss := procStatusKB(0, "VmRSS")
	var srss int64
	if s.slaveRSS != nil {
		srss = s.slaveRSS()
	}
	s.mu.Lock()
	if err == nil {
		s.series = append(s.series, Point{T: now.Sub(s.start).Seconds(), Done: done, SlaveRSS: srss})
	}
	s.peakRSS = max(s.peakRSS, rss)
	s.peakQueued = max(s.peakQueued, queued)
	probe := s.rdb != nil && queued > 0 && s.probes < MaxQueueProbes &&
		float64(queued) >= float64(s.lastProbe)*QueueProbeGrowth
	s.mu.Unlock()
	if s.rdb == nil || ctx.Err() != nil {
		return
	}
	if redisToo {
		if ri, err := readInfo(ctx, s.rdb); err == nil {
			s.mu.Lock()
			if !s.lastCPUAt.IsZero() {
				if wall := now.Sub(s.lastCPUAt).Seconds(); wall > 0 {
					s.peakCore = max(s.peakCore, (ri.cpu-s.lastCPU)/wall)
				}
			}
			s.lastCPU, s.lastCPUAt = ri.cpu, now
			s.mu.Unlock()
		}
	}
	if probe {
		bytes, tasks, err := queueMemory(ctx, s.rdb, s.crawl, s.hosts)
		ri, err2 := readInfo(ctx, s.rdb)
		if err != nil || err2 != nil {
			return
		}
		s.mu.Lock()
		s.probes++
		s.lastProbe = queued
		if tasks > s.probeQueued {
			s.probeQueued, s.probeBytes, s.probeGrowth = tasks, bytes, ri.usedMemory-s.baseMem
		}
		s.mu.Unlock()
	}
}

// redisDone reads a crawl's done and queued counters.
func redisDone(rdb redis.UniversalClient, crawl string) func(ctx context.Context) (int64, int64, error) {
	key := frontier.NewKeys(crawl).Stats
	return func(ctx context.Context) (int64, int64, error) {
		v, err := rdb.HMGet(ctx, key, "done", "queued").Result()
		if err != nil {
			return 0, 0, err
		}
		return toInt(v[0]), toInt(v[1]), nil
	}
}

func toInt(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// rssEnds returns the mean slave RSS over the samples in the first and
// the last 10% of the crawl by pages done (-1 when there are none).
func rssEnds(series []Point, total int64) (first, last int64) {
	var fs, ls, fn, ln int64
	for _, p := range series {
		if p.SlaveRSS <= 0 || total <= 0 {
			continue
		}
		switch f := float64(p.Done) / float64(total); {
		case f > 0 && f <= 0.1:
			fs, fn = fs+p.SlaveRSS, fn+1
		case f >= 0.9 && f < 1:
			ls, ln = ls+p.SlaveRSS, ln+1
		}
	}
	first, last = -1, -1
	if fn > 0 {
		first = fs / fn
	}
	if ln > 0 {
		last = ls / ln
	}
	return first, last
}

// rates turns a series into pages/s over ChartWindow samples.
func rates(series []Point) []Point2 {
	var out []Point2
	w := min(ChartWindow, len(series)-1) // a crawl shorter than the window still shows
	for i := max(w, 1); i < len(series); i++ {
		a, b := series[i-w], series[i]
		if dt := b.T - a.T; dt > 0 {
			out = append(out, Point2{X: b.T, Y: float64(b.Done-a.Done) / dt})
		}
	}
	return out
}

// Point2 is a chart point.
type Point2 struct{ X, Y float64 }
