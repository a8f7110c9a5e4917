package frontier

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Extend implements Frontier: the library's function extend (lease.lua)
// pushes the deadlines of the leases this slave still holds to now + the
// crawl's lease duration, maxCompletions leases a call.
func (f *shard) Extend(ctx context.Context, slave string, leases []Lease) ([]bool, error) {
	held := make([]bool, 0, len(leases))
	for len(leases) > 0 {
		n := min(len(leases), maxCompletions)
		args := []any{slave, n}
		for _, l := range leases[:n] {
			args = append(args, l.URL, l.Token)
		}
		arr, err := f.callSlice(ctx, "extend", args...)
		if err != nil {
			return held, wrap("extend leases", err)
		}
		if len(arr) != n {
			return held, fmt.Errorf("extend leases: %d values for %d leases", len(arr), n)
		}
		for _, v := range arr {
			i, _ := toInt(v)
			held = append(held, i == 1)
		}
		leases = leases[n:]
	}
	if len(held) == 0 {
		return nil, nil
	}
	return held, nil
}

// heldLeases reads the lease data of slave for leases (their URL and
// token as the slave names them) in one HMGET: out[i] is the lease as the
// frontier recorded it when it leased it (task, priority, leased at; no
// deadline), held[i] whether slave holds it with that token now.
func (f *shard) heldLeases(ctx context.Context, slave string, leases []Lease, out []Lease, held []bool) error {
	if len(leases) == 0 {
		return nil
	}
	urls := make([]string, len(leases))
	for i, l := range leases {
		urls[i] = l.URL
	}
	vals, err := f.rdb.HMGet(ctx, f.keys.SlaveLeaseData(slave), urls...).Result()
	if err != nil {
		return wrap("read leases", err)
	}
	for i, v := range vals {
		data, _ := v.(string)
		// slave \t token \t leased_at \t host \t prio \t task (claim.lua)
		parts := strings.SplitN(data, "\t", 6)
		if len(parts) != 6 || parts[0] != slave || parts[1] != strconv.FormatInt(leases[i].Token, 10) {
			continue
		}
		l, err := f.leaseOf(slave, []any{parts[3], parts[4], parts[5], parts[1], parts[2], int64(0), ""})
		if err != nil || l.URL != leases[i].URL {
			continue
		}
		out[i], held[i] = l, true
	}
	return nil
}
