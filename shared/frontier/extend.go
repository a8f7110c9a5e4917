package frontier

import (
	"context"
	"fmt"
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
