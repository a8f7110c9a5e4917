package slaved

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIdleLimits(t *testing.T) {
	tests := []struct {
		name                   string
		concurrency, hostConc  int
		wantTotal, wantPerHost int
	}{
		{"default: 20 hosts × 4 fit", 64, 4, 256, 4},
		{"one worker", 1, 1, 4, 2},
		{"one worker, wide host", 1, 8, 8, 8},
		{"capped", 1024, 4, 1024, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := idleLimits(tt.concurrency, tt.hostConc)
			want := idleConns{total: tt.wantTotal, perHost: tt.wantPerHost, timeout: idleTimeout}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(idleConns{})); diff != "" {
				t.Errorf("idleLimits(%d, %d) (-want +got):\n%s", tt.concurrency, tt.hostConc, diff)
			}
		})
	}
}
