package slaved

import (
	"context"
	"time"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// maxAckBatch bounds one complete script call. A small batch waits ackHold:
// the claim loop takes the acks first, with its claim (CompleteClaim: wait
// wakes it), and the acker only sends what a claim loop that is not
// claiming leaves, or what has waited ackHoldMax (a claim loop that is
// slow to claim: an outage).
const (
	maxAckBatch = 64
	ackHold     = 2 * busyGather
	ackHoldMax  = 5 * ackHold
)

// newAcker returns the batcher that sends completions to the frontier. On
// a Redis outage it keeps them and retries; a completion whose lease was
// lost in the meantime is refused by the frontier and dropped here (the
// task was requeued and is fetched again).
func newAcker(s *Slave) *batcher[frontier.Completion] {
	b := newBatcher(s, "ack", maxAckBatch, 0, func(ctx context.Context, batch []frontier.Completion) error {
		ackStart := time.Now()
		acked, err := s.front.Complete(ctx, s.id, batch)
		s.met.ObserveAck(time.Since(ackStart))
		if err != nil {
			return err
		}
		signal(s.acked)
		s.acksDone(batch, acked)
		return nil
	})
	b.gather = ackHold
	// the claim loop waits for this (wait), to take the acks with its claim
	b.onAdd = func() { signal(s.done) }
	// and while it is claiming it takes them soon: a complete of the
	// acker's own would free host slots that no claim of this slave takes,
	// and the other slaves would all wake to race for them (the frontier
	// announces work to waiting slaves), most of them finding nothing
	b.hold, b.holdMax = s.claiming.Load, ackHoldMax
	return b
}

// acksDone forgets acknowledged leases and counts the lost ones; the
// bodies of the pages acked count for the duplicate cache, those of the
// lost ones do not (dupcache.go).
func (s *Slave) acksDone(batch []frontier.Completion, acked []bool) {
	for i, c := range batch {
		s.track(c.Lease, time.Time{}, false)
		if c.ContentHash != 0 && c.Outcome == frontier.Done {
			if acked[i] {
				s.dups.acked(c.ContentHash)
			} else {
				s.dups.lost(c.ContentHash)
			}
		}
		if !acked[i] {
			s.lostAcks.Add(1)
			s.met.LeasesLost(1)
			s.log.Debug("lease lost before ack", "url", c.Lease.URL)
		}
	}
}
