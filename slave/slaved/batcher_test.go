package slaved

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/shared/ratelog"
)

// TestBatcherGather checks that a small batch waits the gather time for
// more items and a batch of a quarter of maxBatch or more goes at once.
func TestBatcherGather(t *testing.T) {
	defer goleak.VerifyNone(t)
	const gather = 2 * time.Second // far longer than the steps below take
	b, rec := newTestBatcher(8)
	b.gather = gather
	stop := runBatcher(b)
	sent := rec.sent

	// one item waits for the gather window; two more join it
	b.add(1)
	time.Sleep(50 * time.Millisecond)
	b.add(2)
	b.add(3)
	<-sent
	// a quarter of maxBatch (2 of 8) goes without waiting: it arrives well
	// inside the gather time
	b.add(4)
	b.add(5)
	select {
	case <-sent:
	case <-time.After(gather / 2):
		t.Error("a batch of maxBatch/4 waited for the gather time")
	}
	stop()
	want := [][]int{{1, 2, 3}, {4, 5}}
	if d := cmp.Diff(want, rec.got()); d != "" {
		t.Errorf("batches (-want +got):\n%s", d)
	}
}

// TestBatcherOnAdd checks that onAdd runs once per item added, after the
// item is queued (the claim loop's wait takes it from there).
func TestBatcherOnAdd(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &Slave{log: log, rl: ratelog.New(log, time.Minute)}
	b := newBatcher(s, "test", 8, 0, func(context.Context, []int) error { return nil })
	var pending []int
	b.onAdd = func() { pending = append(pending, b.pending()) }
	for i := range 3 {
		b.add(i)
	}
	if d := cmp.Diff([]int{1, 2, 3}, pending); d != "" {
		t.Errorf("queued items when onAdd ran (-want +got):\n%s", d)
	}
}

// TestBatcherTakeDuringGather checks the acker beside a claim loop that
// takes its acks (take): what was taken is not sent again, a queue emptied
// by take sends nothing (no empty call, no "acked" signal), and items
// queued after a take wait a whole gather time of their own rather than
// going out when the first item's time ends. Before, the acker sent
// whatever was queued one gather time after the first item, however
// fresh, so a busy slave's acks left in separate calls that readied host
// slots nobody claimed, and other slaves woke to find nothing.
func TestBatcherTakeDuringGather(t *testing.T) {
	defer goleak.VerifyNone(t)
	const gather = time.Second
	b, rec := newTestBatcher(64)
	b.gather = gather
	defer runBatcher(b)()
	sent := rec.sent

	// taken while the acker gathers, then an item the claim loop leaves:
	// it waits a gather time from the take, not from the first add
	b.add(1)
	time.Sleep(gather / 10)
	if d := cmp.Diff([]int{1}, b.take(64)); d != "" {
		t.Fatalf("take (-want +got):\n%s", d)
	}
	b.add(2)
	select {
	case <-sent:
	case <-time.After(10 * gather):
		t.Fatal("the item left after a take was never sent")
	}
	// a queue a take emptied while the acker gathered sends nothing
	b.add(3)
	time.Sleep(gather / 10)
	if d := cmp.Diff([]int{3}, b.take(64)); d != "" {
		t.Fatalf("take (-want +got):\n%s", d)
	}
	time.Sleep(gather * 5 / 2)

	batches, after := rec.got(), rec.sentAfter()
	if d := cmp.Diff([][]int{{2}}, batches); d != "" {
		t.Fatalf("batches (-want +got):\n%s", d)
	}
	// lower bound only: a loaded machine can only make it later
	if after[0] < gather*3/2 {
		t.Errorf("the item queued after the take went after %v: it should wait a gather time (%v) of its own after the first one's ended", after[0], gather)
	}
}

// TestBatcherHold checks the acker's hold: while hold says the claim loop
// will take the items, even a batch of a quarter of maxBatch or more waits
// (up to holdMax after the last take); once hold turns false it goes
// after one gather time; a full batch (maxBatch) always goes at once.
func TestBatcherHold(t *testing.T) {
	defer goleak.VerifyNone(t)
	b, rec := newTestBatcher(8)
	var holding atomic.Bool
	holding.Store(true)
	b.gather, b.hold, b.holdMax = 20*time.Millisecond, holding.Load, time.Minute
	defer runBatcher(b)()
	sent := rec.sent

	// a quarter of maxBatch, held: many gather times pass without a send
	b.add(1)
	b.add(2)
	select {
	case <-sent:
		t.Fatal("a held batch was sent")
	case <-time.After(300 * time.Millisecond):
	}
	// the claim loop took them
	if d := cmp.Diff([]int{1, 2}, b.take(8)); d != "" {
		t.Fatalf("take (-want +got):\n%s", d)
	}
	// a full batch goes although held
	for i := range 8 {
		b.add(10 + i)
	}
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("a full batch was held")
	}
	// the claim loop parks: what is queued goes
	holding.Store(false)
	b.add(20)
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("a batch was held after hold turned false")
	}
	want := [][]int{{10, 11, 12, 13, 14, 15, 16, 17}, {20}}
	if d := cmp.Diff(want, rec.got()); d != "" {
		t.Errorf("batches (-want +got):\n%s", d)
	}
}

// sentBatches records what a test batcher sent, and when.
type sentBatches struct {
	mu      sync.Mutex
	start   time.Time
	batches [][]int
	after   []time.Duration // since start
	sent    chan struct{}   // a value per batch sent
}

func (r *sentBatches) got() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]int(nil), r.batches...)
}

func (r *sentBatches) sentAfter() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.after...)
}

// newTestBatcher returns a batcher of ints of maxBatch whose sends are
// recorded.
func newTestBatcher(maxBatch int) (*batcher[int], *sentBatches) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &Slave{log: log, rl: ratelog.New(log, time.Minute)}
	rec := &sentBatches{start: time.Now(), sent: make(chan struct{}, 8)}
	b := newBatcher(s, "test", maxBatch, 0, func(_ context.Context, batch []int) error {
		rec.mu.Lock()
		rec.batches = append(rec.batches, batch)
		rec.after = append(rec.after, time.Since(rec.start))
		rec.mu.Unlock()
		rec.sent <- struct{}{}
		return nil
	})
	return b, rec
}

// runBatcher runs b until the returned stop is called (which closes it
// and waits for run to return).
func runBatcher(b *batcher[int]) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); b.run(ctx) }()
	return func() { b.close(); cancel(); <-done }
}
