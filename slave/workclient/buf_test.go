package workclient

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	api "github.com/redcrawl/redcrawl/shared/workapi"
)

func TestReadAll(t *testing.T) {
	body := strings.Repeat("x", 70<<10)
	for _, c := range []struct {
		name string
		n    int64 // Content-Length, -1 unknown
		buf  []byte
	}{
		{"length known", int64(len(body)), nil},
		{"length unknown", -1, nil},
		{"into a small pooled buffer", -1, make([]byte, 3, 16)},
		{"into a large pooled buffer", int64(len(body)), make([]byte, 0, 1<<20)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readAll(strings.NewReader(body), c.buf[:0], c.n)
			if err != nil || string(got) != body {
				t.Fatalf("readAll: %d bytes, %v; want the %d of the body", len(got), err, len(body))
			}
		})
	}
}

// TestPooledAnswer: an answer decoded from a pooled buffer keeps none of
// its bytes, so the buffer's next use changes nothing of it.
func TestPooledAnswer(t *testing.T) {
	buf := getBuf()
	data, err := readAll(strings.NewReader(`{"acked":[true],"claim":{"leases":[{"url":"http://a.test/","host":"a.test","token":7}],"wait_ms":0}}`), (*buf)[:0], -1)
	if err != nil {
		t.Fatal(err)
	}
	var res api.CompleteResponse
	if err := api.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	want := api.CompleteResponse{Acked: []bool{true}, Claim: &api.ClaimResponse{Leases: []api.Lease{{URL: "http://a.test/", Host: "a.test", Token: 7}}}}
	copy(data, bytes.Repeat([]byte("#"), len(data)))
	*buf = data
	putBuf(buf)
	if d := cmp.Diff(want, res); d != "" {
		t.Errorf("answer after its buffer was reused (-want +got):\n%s", d)
	}
}
