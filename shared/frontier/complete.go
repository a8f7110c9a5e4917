package frontier

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redcrawl/redcrawl/shared/events"
)

// Complete implements Frontier.
func (f *Redis) Complete(ctx context.Context, slave string, cs []Completion) ([]bool, error) {
	if f.countCompletions(cs) {
		defer f.giveBack(ctx)
	}
	if len(f.shards) == 1 {
		return f.shards[0].complete(ctx, slave, cs)
	}
	acked, _, err := f.completeSharded(ctx, slave, cs, 0, ClaimOptions{})
	return acked, err
}

// CompleteClaim implements Frontier: the links for other shards
// first, then the completions of each shard, the home shard's with the
// claim.
func (f *Redis) CompleteClaim(ctx context.Context, slave string, cs []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	if f.countCompletions(cs) && max <= 0 {
		defer f.giveBack(ctx)
	}
	var acked []bool
	res, err := f.limitClaim(ctx, max, func(max int) (res ClaimResult, err error) {
		if len(f.shards) == 1 {
			acked, res, err = f.shards[0].completeClaim(ctx, slave, cs, max, opts)
		} else {
			acked, res, err = f.completeSharded(ctx, slave, cs, max, opts)
		}
		return res, err
	})
	return acked, res, err
}

func (f *Redis) completeSharded(ctx context.Context, slave string, cs []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	idx, local, remote, remotePol, err := f.splitCompletions(cs)
	if err != nil {
		return nil, ClaimResult{}, err
	}
	if err := f.sendRemote(ctx, slave, remote, remotePol); err != nil {
		return nil, ClaimResult{}, err
	}
	for k := range idx {
		f.woke(k) // a host slot freed, links, a retry or a release
	}
	return f.completeLocal(ctx, slave, idx, local, max, opts)
}

// splitCompletions puts each completion on its lease's shard with the
// links and policies of that shard's hosts (local, by index; idx lists
// each shard's), and the other links and policies by the shard they go to.
func (f *Redis) splitCompletions(cs []Completion) (idx map[int][]int, local []Completion,
	remote map[int][]Task, remotePol map[int]map[string]HostPolicy, err error) {
	idx = map[int][]int{}
	local = make([]Completion, len(cs))
	remote = map[int][]Task{}
	remotePol = map[int]map[string]HostPolicy{}
	for i, c := range cs {
		k := c.Lease.Shard
		if k < 0 || k >= len(f.shards) {
			return nil, nil, nil, nil, fmt.Errorf("complete %s: lease of shard %d, the crawl has %d", c.Lease.URL, k, len(f.shards))
		}
		idx[k] = append(idx[k], i)
		lc := c
		lc.Links, lc.Policies = nil, nil
		if c.Outcome == Done {
			for _, l := range c.Links {
				if s := f.ShardOf(l.Host); s == k {
					lc.Links = append(lc.Links, l)
				} else {
					remote[s] = append(remote[s], l)
				}
			}
		}
		for h, p := range c.Policies {
			s := f.ShardOf(h)
			if s == k {
				if lc.Policies == nil {
					lc.Policies = map[string]HostPolicy{}
				}
				lc.Policies[h] = p
			} else {
				if remotePol[s] == nil {
					remotePol[s] = map[string]HostPolicy{}
				}
				remotePol[s][h] = p
			}
		}
		local[i] = lc
	}
	return idx, local, remote, remotePol, nil
}

// sendRemote enqueues links on the shards they belong to, one call per
// shard (per seedBatch links): the first step of a sharded completion.
func (f *Redis) sendRemote(ctx context.Context, slave string, remote map[int][]Task, remotePol map[int]map[string]HostPolicy) error {
	for _, s := range sortedShards(remote) {
		if err := f.shards[s].enqueueLinks(ctx, slave, remote[s], remotePol[s]); err != nil {
			return fmt.Errorf("shard %d: %w", s, err)
		}
		f.woke(s)
	}
	return nil
}

// completeLocal completes each shard's completions (split), the home
// shard's last with the claim when max > 0.
func (f *Redis) completeLocal(ctx context.Context, slave string, idx map[int][]int, local []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	acked := make([]bool, len(local))
	sub := func(k int) []Completion {
		out := make([]Completion, len(idx[k]))
		for j, i := range idx[k] {
			out[j] = local[i]
		}
		return out
	}
	for _, k := range sortedShards(idx) {
		if k == f.home && max > 0 {
			continue
		}
		a, err := f.shards[k].complete(ctx, slave, sub(k))
		if err != nil {
			return nil, ClaimResult{}, fmt.Errorf("shard %d: %w", k, err)
		}
		for j, i := range idx[k] {
			acked[i] = a[j]
		}
	}
	if max <= 0 {
		return acked, ClaimResult{}, nil
	}
	a, res, err := f.shards[f.home].completeClaim(ctx, slave, sub(f.home), max, opts)
	if err != nil {
		return nil, ClaimResult{}, fmt.Errorf("shard %d: %w", f.home, err)
	}
	for j, i := range idx[f.home] {
		acked[i] = a[j]
	}
	res, err = f.claimSharded(ctx, slave, max, opts, &res)
	return acked, res, err
}

// enqueueLinks calls the library's function links (seed.lua), which
// enqueues links found on a page of another shard as complete does with a
// page's links, for links of this shard's hosts, in
// batches; links the link cache knows are left out, and the ones sent are
// remembered once the call succeeded.
func (f *shard) enqueueLinks(ctx context.Context, slave string, links []Task, policies map[string]HostPolicy) error {
	var fps []uint64
	if f.links != nil {
		links, fps = f.unknownLinks(links)
	}
	if len(links) == 0 && len(policies) == 0 {
		return nil
	}
	for from := 0; from < len(links) || from == 0; from += seedBatch {
		to := min(from+seedBatch, len(links))
		var pol map[string]HostPolicy
		if from == 0 {
			pol = policies
		}
		args := []any{slave, len(pol), to - from}
		args = appendPolicies(args, pol)
		var batchFPs []uint64
		if fps != nil {
			batchFPs = fps[from:to]
		}
		args = f.appendTuplesFP(args, links[from:to], batchFPs)
		if _, err := f.callDurable(ctx, "links", args...); err != nil {
			return wrap("enqueue links", err)
		}
		for _, fp := range batchFPs {
			f.links.add(fp)
		}
		if to >= len(links) {
			break
		}
	}
	return nil
}

// complete is Redis.Complete on one shard: the library's function complete
// (complete.lua), maxCompletions completions a call.
func (f *shard) complete(ctx context.Context, slave string, cs []Completion) ([]bool, error) {
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
	// the whole ARGV, and the function complete_claim's 3 more, in one
	// slice: a batch of pages with links is a few thousand values
	n := 6
	for _, c := range cs {
		n += 13 + 2*len(c.Events) + 4*len(c.Policies) + 7*len(c.Links)
	}
	args = make([]any, 0, n)
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
func (f *shard) scopedContent(content uint64, scope string) uint64 {
	if scope == "" {
		return content
	}
	m, _ := f.contentMAC.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, f.contentKey[:])
	} else {
		m.Reset()
	}
	var buf [sha256.Size]byte
	m.Write([]byte(scope))
	m.Write(binary.BigEndian.AppendUint64(buf[:0], content))
	sum := binary.BigEndian.Uint64(m.Sum(buf[:0]))
	f.contentMAC.Put(m)
	return sum
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

// completeClaim acknowledges cs and then claims up to max tasks, in one
// call (the library's function complete_claim: complete.lua): Complete
// followed by ClaimWaitOpts, in one round trip. With no completions it is
// ClaimWaitOpts; with max <= 0, Complete.
func (f *shard) completeClaim(ctx context.Context, slave string, cs []Completion, max int, opts ClaimOptions) ([]bool, ClaimResult, error) {
	if len(cs) == 0 {
		res, err := f.claim(ctx, slave, max, opts)
		return nil, res, err
	}
	if max <= 0 {
		acked, err := f.complete(ctx, slave, cs)
		return acked, ClaimResult{}, err
	}
	var head []bool
	if len(cs) > maxCompletions {
		var err error
		if head, err = f.complete(ctx, slave, cs[:len(cs)-maxCompletions]); err != nil {
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
