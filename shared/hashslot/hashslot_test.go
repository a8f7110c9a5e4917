package hashslot

import "testing"

func TestOf(t *testing.T) {
	// values from the Redis Cluster specification and CLUSTER KEYSLOT
	for key, want := range map[string]int{"123456789": 12739, "foo": 12182, "{user1000}.following": 3443,
		"{user1000}.followers": 3443, "foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061} {
		if got := Of(key); got != want {
			t.Errorf("Of(%q) = %d, want %d", key, got, want)
		}
	}
}
