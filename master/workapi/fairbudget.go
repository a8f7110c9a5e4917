package workapi

import (
	"context"
	"strconv"
	"sync"
)

// fairBudget is the decode budget (Limits.DecodeBudget) shared fairly by
// the tokens: bytes of request bodies held while they are decoded, at
// most capacity in all. A token may hold at most its share, the capacity
// over the tokens holding or waiting (but always one body when it holds
// none), and the tokens waiting are served in turn, each its oldest
// request first. So tokens that flood the master with largest bodies
// keep each other waiting, not an honest slave: its next request is
// served within about one body's decode, whatever the others have
// queued (a FIFO semaphore would put it behind every one of them).
type fairBudget struct {
	capacity int64

	mu    sync.Mutex
	used  int64
	held  map[string]int64     // bytes held, by token
	queue map[string][]*waiter // requests waiting, by token, oldest first
	turn  []string             // the tokens with requests waiting, in serving order
}

type waiter struct {
	n       int64
	granted chan struct{} // closed when the room is the waiter's
}

// budgetKey is the token's name in the budget.
func budgetKey(t Token) string { return strconv.FormatInt(t.ID, 10) + "/" + t.Slave }

func newFairBudget(capacity int64) *fairBudget {
	return &fairBudget{capacity: capacity, held: map[string]int64{}, queue: map[string][]*waiter{}}
}

// acquire waits until token may hold n more bytes, or ctx ends (its
// error). n is at most the capacity.
func (b *fairBudget) acquire(ctx context.Context, token string, n int64) error {
	b.mu.Lock()
	if len(b.turn) == 0 && b.fits(token, n) {
		b.grant(token, n)
		b.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, granted: make(chan struct{})}
	if len(b.queue[token]) == 0 {
		b.turn = append(b.turn, token)
	}
	b.queue[token] = append(b.queue[token], w)
	b.dispatch()
	b.mu.Unlock()

	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.granted: // granted meanwhile: give it back
		b.put(token, n)
		return ctx.Err()
	default:
	}
	q := b.queue[token]
	for i, x := range q {
		if x == w {
			b.queue[token] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(b.queue[token]) == 0 {
		b.dropTurn(token)
	}
	b.dispatch() // a waiter that was in the way may be gone
	return ctx.Err()
}

// release gives back n bytes token held.
func (b *fairBudget) release(token string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.put(token, n)
}

func (b *fairBudget) put(token string, n int64) {
	b.used -= n
	if b.held[token] -= n; b.held[token] <= 0 {
		delete(b.held, token)
	}
	b.dispatch()
}

// fits reports whether token may take n more bytes now: room left, and
// within its share unless it holds nothing.
func (b *fairBudget) fits(token string, n int64) bool {
	if b.used+n > b.capacity {
		return false
	}
	h := b.held[token]
	return h == 0 || h+n <= b.capacity/b.active()
}

// active is the number of tokens holding room or waiting for it.
func (b *fairBudget) active() int64 {
	n := len(b.held)
	for _, t := range b.turn {
		if _, ok := b.held[t]; !ok {
			n++
		}
	}
	return int64(max(n, 1))
}

func (b *fairBudget) grant(token string, n int64) {
	b.used += n
	b.held[token] += n
}

// dispatch serves the waiting tokens in turn, each its oldest request,
// while any fits; a token served goes to the end of the turn.
func (b *fairBudget) dispatch() {
	for served := true; served; {
		served = false
		for i := 0; i < len(b.turn); i++ {
			token := b.turn[i]
			w := b.queue[token][0]
			if !b.fits(token, w.n) {
				continue
			}
			b.grant(token, w.n)
			close(w.granted)
			b.queue[token] = b.queue[token][1:]
			b.turn = append(b.turn[:i:i], b.turn[i+1:]...)
			if len(b.queue[token]) > 0 {
				b.turn = append(b.turn, token)
			} else {
				delete(b.queue, token)
			}
			served = true
			break
		}
	}
}

func (b *fairBudget) dropTurn(token string) {
	delete(b.queue, token)
	for i, t := range b.turn {
		if t == token {
			b.turn = append(b.turn[:i:i], b.turn[i+1:]...)
			return
		}
	}
}
