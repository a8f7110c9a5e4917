package frontier

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redcrawl/redcrawl/shared/events"
)

// Complete implements Frontier: the library's function complete
// (complete.lua), maxCompletions completions a call.
func (f *shard) Complete(ctx context.Context, slave string, cs []Completion) ([]bool, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	acked := make([]bool, 0, len(cs))
	for len(cs) > 0 {
		n := min(len(cs), maxCompletions)
		args, sent, err := f.completeArgs(slave, cs[:n])
		if err != nil {
			return acked, err
		}
		arr, err := f.callSliceDurable(ctx, "complete", args...)
		if err != nil {
			return acked, wrap("complete", err)
		}
		if len(arr) != n+1 {
			return acked, fmt.Errorf("complete: %d values for %d completions", len(arr), n)
		}
		acked = append(acked, f.acksOf(arr, sent)...)
		cs = cs[n:]
	}
	return acked, nil
}

// completeArgs builds the function complete's ARGV after the prefix for
// cs; sent[i] holds the fingerprints of the links completion i sends
// (link cache only), for acksOf. What the function would refuse is mended
// here: a reason is cut to maxReasonBytes, an event over maxEventBytes is
// replaced by an exception that says so.
func (f *shard) completeArgs(slave string, cs []Completion) (args []any, sent [][]uint64, err error) {
	args = make([]any, 0, 4+14*len(cs))
	args = append(args, slave, seed(), len(cs))
	sent = make([][]uint64, len(cs))
	for i, c := range cs {
		if c.Outcome < Done || c.Outcome > Release {
			return nil, nil, fmt.Errorf("complete %s: invalid outcome %d", c.Lease.URL, c.Outcome)
		}
		links := c.Links
		var fps []uint64 // the links' fingerprints, with the link cache
		if c.Outcome != Done {
			links = nil
		} else if f.links != nil {
			links, fps = f.unknownLinks(links)
			sent[i] = fps
		}
		chex, cb, cf := "", "", ""
		if c.ContentHash != 0 && c.Outcome == Done {
			chex = fmt.Sprintf("%016x", c.ContentHash)
			cb, cf = f.contentSlot(f.scopedContent(c.ContentHash, c.ContentScope))
		}
		args = append(args, c.Lease.URL, c.Lease.Token, c.Outcome.String(), max(ms(c.HostDelay), 0),
			max(ms(c.Backoff), 0), max(ms(c.RetryIn), 0), truncate(c.Reason, maxReasonBytes), chex, cb, cf,
			len(c.Events), len(links), len(c.Policies))
		for _, e := range c.Events {
			if len(e.Data) > maxEventBytes {
				e = f.tooLarge(slave, c.Lease, e)
			}
			args = append(args, string(e.Type), e.Data)
		}
		args = appendPolicies(args, c.Policies)
		args = f.appendTuplesFP(args, links, fps)
	}
	return args, sent, nil
}

// scopedContent is the fingerprint a content hash is kept under in its
// scope (Completion.ContentScope): the hash itself crawl-wide, else the
// first 8 bytes of an HMAC-SHA-256 of the scope and the hash keyed by
// this process's own random key (shard.contentKey). A slave cannot aim
// its scope's slot at another's: it knows its scope, but not the key.
// (Another process's slots for the same scope differ: a scope's pages
// are duplicates of its own pages met through the same process.)
func (f *shard) scopedContent(hash uint64, scope string) uint64 {
	if scope == "" {
		return hash
	}
	m := hmac.New(sha256.New, f.contentKey[:])
	m.Write([]byte(scope))
	m.Write(binary.BigEndian.AppendUint64(nil, hash))
	return binary.BigEndian.Uint64(m.Sum(nil))
}

// tooLarge replaces an event longer than maxEventBytes by an exception
// that says so.
func (f *shard) tooLarge(slave string, l Lease, e Event) Event {
	ev, err := NewEvent(&events.Exception{Crawl: f.opt.Crawl, Kind: events.KindTooLarge, URL: l.URL, Host: l.Host,
		Slave: slave, Attempt: l.Attempt, Message: fmt.Sprintf("%s record of %d bytes dropped: the frontier takes at most %d",
			e.Type, len(e.Data), maxEventBytes), At: time.Now().UnixMilli()})
	if err != nil {
		return Event{Type: events.TypeException, Data: []byte("{}")}
	}
	return ev
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// acksOf reads the function's acks (the first len(sent) values: 1 held, 2
// held but its links not followed, 0 lost) and caches the links of the
// completions acked with their links followed.
func (f *shard) acksOf(arr []any, sent [][]uint64) []bool {
	acked := make([]bool, len(sent))
	for i := range sent {
		v, _ := toInt(arr[i])
		acked[i] = v >= 1
		if v == 1 {
			for _, fp := range sent[i] {
				f.links.add(fp)
			}
		}
	}
	return acked
}

// CompleteClaim acknowledges cs and then claims up to max tasks, in one
// call (the library's function complete_claim: complete.lua): Complete
// followed by ClaimWaitOpts, in one round trip. With no completions it is
// ClaimWaitOpts; with max <= 0, Complete.
func (f *shard) CompleteClaim(ctx context.Context, slave string, cs []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	if len(cs) == 0 {
		res, err := f.ClaimWaitOpts(ctx, slave, max, opts)
		return nil, res, err
	}
	if max <= 0 {
		acked, err := f.Complete(ctx, slave, cs)
		return acked, ClaimResult{}, err
	}
	var head []bool
	if len(cs) > maxCompletions {
		var err error
		if head, err = f.Complete(ctx, slave, cs[:len(cs)-maxCompletions]); err != nil {
			return head, ClaimResult{}, err
		}
		cs = cs[len(cs)-maxCompletions:]
	}
	args, sent, err := f.completeArgs(slave, cs)
	if err != nil {
		return head, ClaimResult{}, err
	}
	args = append(args, min(max, maxClaim), boolArg(opts.Render), opts.maxHeld())
	arr, err := f.callSliceDurable(ctx, "complete_claim", args...)
	if err != nil {
		return head, ClaimResult{}, wrap("complete and claim", err)
	}
	if len(arr) < len(cs)+1 {
		return head, ClaimResult{}, fmt.Errorf("complete and claim: %d values for %d completions", len(arr), len(cs))
	}
	acked := append(head, f.acksOf(arr, sent)...)
	cr, err := f.claimResult(slave, arr[len(cs)+1:])
	if err != nil {
		return acked, ClaimResult{}, fmt.Errorf("complete and claim: %w", err)
	}
	return acked, cr, nil
}

// unknownLinks returns the links not in the link cache and their
// fingerprints (each link hashed once).
func (f *shard) unknownLinks(links []Task) ([]Task, []uint64) {
	out := links[:0:0]
	fps := make([]uint64, 0, len(links))
	for _, l := range links {
		if fp := Fingerprint(l.URL); !f.links.has(fp) {
			out = append(out, l)
			fps = append(fps, fp)
		}
	}
	return out, fps
}

func boolArg(b bool) int {
	if b {
		return 1
	}
	return 0
}

// appendPolicies adds host policies as ARGV, 4 each in host order: host,
// delay_ms, jitter, conc, each "" for the crawl's default (set_policy in
// queue.lua).
func appendPolicies(args []any, ps map[string]HostPolicy) []any {
	hosts := make([]string, 0, len(ps))
	for h := range ps {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		args = append(args, policyArgs(h, ps[h])...)
	}
	return args
}

func policyArgs(host string, p HostPolicy) []any {
	delay, jitter, conc := "", "", ""
	if d := ms(p.Delay); d > 0 {
		delay = strconv.FormatInt(min(d, maxPolicyDelayMs), 10)
	} else if p.Delay > 0 {
		delay = "1" // under a millisecond: the least override there is
	}
	if p.Jitter >= 0 {
		jitter = fmtFloat(min(p.Jitter, 100))
	}
	if p.Concurrency > 0 {
		conc = strconv.Itoa(min(p.Concurrency, maxPolicyConcurrency))
	}
	return []any{host, delay, jitter, conc}
}
