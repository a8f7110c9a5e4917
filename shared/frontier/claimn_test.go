package frontier_test

import (
	"context"

	"github.com/redcrawl/redcrawl/shared/frontier"
)

// claimN leases up to n tasks, render tasks not included
// (ClaimWaitOpts with the default options).
func claimN(ctx context.Context, f frontier.Frontier, slave string, n int) ([]frontier.Lease, error) {
	res, err := f.ClaimWaitOpts(ctx, slave, n, frontier.ClaimOptions{})
	return res.Leases, err
}
