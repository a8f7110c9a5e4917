package frontier

import (
	"context"
	"fmt"
	"sync"
)

// PutRules publishes a rule set to every shard (a claim returns its
// shard's version), shard 0 last: its channel tells the slaves.
func (f *Redis) PutRules(ctx context.Context, version string, blob []byte) error {
	if err := checkRulesVersion(version); err != nil {
		return err // before any shard has it
	}
	for k := len(f.shards) - 1; k > 0; k-- {
		s := f.shards[k]
		if err := s.rdb.HSet(ctx, s.keys.Rules, "version", version, "blob", blob).Err(); err != nil {
			return wrap(fmt.Sprintf("put rules on shard %d", k), err)
		}
	}
	return f.shards[0].putRules(ctx, version, blob)
}

// The master publishes the crawl's validated rule set (rule files) with
// PutRules: the hash crawl:{name}:rules holds its version and blob, and the
// version is published on RulesChannel. Slaves learn of a new version from
// every claim (ClaimResult.RulesVersion, no extra round trip) and, if they
// want it sooner, from SubscribeRules; they then read the set with
// GetRules.

// RulesChannel returns the pub/sub channel the rules' versions are
// published on (not a key; it carries the crawl's hash tag).
func (r *Redis) RulesChannel() string { return r.shards[0].keys.RulesChannel }

// WorkMessage is published on WorkChannel by the function that makes a
// host claimable sooner than a waiting slave would look again (a seed, a
// recrawl, requeued failures, links, a host slot freed, a lease taken
// back: wake_waiters in cache.lua), so that idle slaves claim at once
// rather than at their next idle poll. It is never a rule set's version
// (PutRules refuses it).
const WorkMessage = "+work"

// checkRulesVersion refuses the versions that mean something else: ""
// (no rules) and WorkMessage.
func checkRulesVersion(version string) error {
	if version == "" || version == WorkMessage {
		return fmt.Errorf("put rules: version %q is reserved", version)
	}
	return nil
}

// putRules stores a rule set under a version, replacing the previous one,
// and publishes the version, in one MULTI/EXEC round trip. The version must
// not be empty ("" means no rules); the frontier does not look into blob.
func (f *shard) putRules(ctx context.Context, version string, blob []byte) error {
	if err := checkRulesVersion(version); err != nil {
		return err
	}
	pipe := f.rdb.TxPipeline()
	pipe.HSet(ctx, f.keys.Rules, "version", version, "blob", blob)
	pipe.Publish(ctx, f.keys.RulesChannel, version)
	_, err := pipe.Exec(ctx)
	return wrap("put rules", err)
}

// GetRules returns the stored rule set; ok is false when none was put.
func (r *Redis) GetRules(ctx context.Context) (version string, blob []byte, ok bool, err error) {
	f := r.shards[0]
	vals, err := f.rdb.HMGet(ctx, f.keys.Rules, "version", "blob").Result()
	if err != nil {
		return "", nil, false, wrap("get rules", err)
	}
	v, _ := vals[0].(string)
	if v == "" {
		return "", nil, false, nil
	}
	b, _ := vals[1].(string)
	return v, []byte(b), true, nil
}

// SubscribeRules subscribes to the rules' versions: the channel gets each
// version PutRules publishes from the moment SubscribeRules returns (it is
// subscribed by then) until stop is called or ctx ends, when it is closed;
// stop must be called to free the connection.
// A version published while the subscriber is disconnected is missed: the
// claim's RulesVersion is the check that never misses. The channel is
// buffered; a version that finds it full replaces nothing and is dropped,
// as the next claim reports it anyway.
func (r *Redis) SubscribeRules(ctx context.Context) (versions <-chan string, stop func(), err error) {
	f := r.shards[0]
	ps := f.rdb.Subscribe(ctx, f.keys.RulesChannel, f.keys.WorkChannel)
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return nil, nil, wrap("subscribe rules", err)
	}
	out := make(chan string, 16)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		ch := ps.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				v := m.Payload
				if m.Channel == f.keys.WorkChannel {
					v = WorkMessage // whatever a slave published there
				}
				select {
				case out <- v:
				default:
				}
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			ps.Close()
			<-done
		})
	}
	return out, stop, nil
}
