package slaved

import (
	"context"
	"time"
)

// progress logs one line every slave.progress_every: pages, pages/s over
// the interval and since the start, errors and fetches in flight.
func (s *Slave) progress(ctx context.Context) {
	every := s.cfg.Slave.ProgressEvery
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	lastPages, lastAt := s.pages.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			pages := s.pages.Load()
			rate := float64(pages-lastPages) / now.Sub(lastAt).Seconds()
			avg := float64(pages) / now.Sub(s.started).Seconds()
			s.log.Info("progress", "pages", pages, "pages_per_sec", round1(rate), "avg_pages_per_sec", round1(avg),
				"errors", s.errors.Load(), "in_flight", s.inFlight(), "lost_acks", s.lostAcks.Load())
			lastPages, lastAt = pages, now
		}
	}
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }
