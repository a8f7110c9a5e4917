package slaved

// Heartbeats: registering the slave, reporting its counters, and carrying
// out the admin's requests they bring back (drain, retired proxies).

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/frontier"
)

// heartbeater registers the slave and reports its counters.
func (s *Slave) heartbeater(ctx context.Context) {
	t := time.NewTicker(s.cfg.Slave.HeartbeatInterval)
	defer t.Stop()
	var lastPages int64
	lastAt := time.Now()
	rate := 0.0
	failing := false
	for {
		now := time.Now()
		pages := s.pages.Load()
		if dt := now.Sub(lastAt).Seconds(); dt > 0.5 {
			inst := float64(pages-lastPages) / dt
			rate = 0.5*rate + 0.5*inst
			lastPages, lastAt = pages, now
		}
		state := "running"
		if s.draining.Load() {
			state = "draining"
		}
		hb := events.Heartbeat{Crawl: s.cfg.Crawl.Name, Slave: s.id, Host: s.host, PID: os.Getpid(),
			At: s.now().UnixMilli(), StartedAt: s.started.UnixMilli(), Pages: pages, Errors: s.errors.Load(),
			InFlight: s.inFlight(), Bytes: s.bytes.Load(), RSS: rss(), PagesPerSec: rate,
			Concurrency: s.cfg.Slave.Concurrency, State: state, MetricsAddr: s.metricsAddress(),
			Render: s.canRender.Load(), RulesVersion: s.rulesVersion()}
		// not cut short by ctx: a heartbeat abandoned mid-call may still
		// land after the slave's leave, registering it again (Run waits
		// for this loop to end before it leaves)
		hbCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), heartbeatTimeout)
		err := s.heartbeat(hbCtx, hb)
		cancel()
		if err == nil {
			s.beatWent(now, time.Now())
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failing = true
			s.rl.Log(ctx, levelWarn, "heartbeat", "heartbeat failed", "err", err)
		} else if failing {
			failing = false
			s.rl.Reset("heartbeat")
			s.log.Info("heartbeat back")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// beatWent records a heartbeat sent at sent that went through, its answer
// back at done (both monotonic). When the last one before was sent three
// quarters of master.dead_after or more before done, the master may have
// found the slave silent for dead_after in between (a beat's answer shows
// only that the master had it by done) and taken back its leases:
// beatResumed makes mayFetch refuse every lease claimed before done.
func (s *Slave) beatWent(sent, done time.Time) {
	if prev := s.beatSent.Load(); prev != nil && done.Sub(*prev) >= s.deadSoon() {
		s.beatResumed.Store(&done)
	}
	s.beatSent.Store(&sent)
}

// heartbeatTimeout bounds one heartbeat call, which a stop does not cut
// short.
const heartbeatTimeout = 5 * time.Second

// controller is a Backend that tells a slave the admin's requests with
// each heartbeat (frontier.Redis).
type controller interface {
	HeartbeatControl(ctx context.Context, hb events.Heartbeat) (frontier.Control, error)
}

// heartbeat sends one heartbeat and carries out the admin's requests it
// brings back: drain (finish the leases held, then leave) and retired
// proxies; with Options.ExitWhenDone, a finished crawl is a drain too.
func (s *Slave) heartbeat(ctx context.Context, hb events.Heartbeat) error {
	c, ok := s.front.(controller)
	if !ok {
		return s.front.Heartbeat(ctx, hb)
	}
	ctl, err := c.HeartbeatControl(ctx, hb)
	if err != nil {
		return err
	}
	if ctl.Drain && !s.drainAsked.Swap(true) {
		s.log.Info("drain asked by an admin: finishing the leases held, then leaving", "in_flight", s.inFlight())
		s.draining.Store(true)
		s.drain()
	}
	if ctl.Finished && s.opt.ExitWhenDone && !s.finishSeen.Swap(true) {
		s.log.Info("crawl finished: leaving (--exit-when-done)", "in_flight", s.inFlight())
		s.draining.Store(true)
		s.drain()
	}
	if s.httpf != nil && len(ctl.RetiredProxies) > 0 {
		s.httpf.retire(ctl.RetiredProxies)
	}
	return nil
}

// rss returns the resident set size in bytes (Linux), else the Go heap.
func rss() int64 {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 1 {
			if pages, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				return pages * int64(os.Getpagesize())
			}
		}
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.Sys)
}
