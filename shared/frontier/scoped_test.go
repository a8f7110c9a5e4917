package frontier

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"sync"
	"testing"
)

// TestScopedContent: a scoped content hash is the first 8 bytes of
// HMAC-SHA-256(contentKey, scope ‖ hash), the same however the pooled
// MACs are reused across goroutines; the crawl-wide scope ("") keeps the
// hash itself.
func TestScopedContent(t *testing.T) {
	f := &shard{}
	copy(f.contentKey[:], "0123456789abcdef0123456789abcdef")
	want := func(h uint64, scope string) uint64 {
		m := hmac.New(sha256.New, f.contentKey[:])
		m.Write([]byte(scope))
		m.Write(binary.BigEndian.AppendUint64(nil, h))
		return binary.BigEndian.Uint64(m.Sum(nil))
	}
	if got := f.scopedContent(42, ""); got != 42 {
		t.Errorf("crawl-wide scope: %d, want 42", got)
	}
	if f.scopedContent(42, "pi1") == f.scopedContent(42, "pi2") {
		t.Error("two scopes share a slot")
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				h, scope := uint64(i*7+g), []string{"pi1", "pi2", "a-longer-slave-name"}[i%3]
				if got, w := f.scopedContent(h, scope), want(h, scope); got != w {
					t.Errorf("scopedContent(%d, %q) = %x, want %x", h, scope, got, w)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkScopedContent(b *testing.B) {
	f := &shard{}
	for i := range b.N {
		f.scopedContent(uint64(i), "pi1")
	}
}
