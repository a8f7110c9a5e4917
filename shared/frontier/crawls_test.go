package frontier

import "testing"

func TestCrawlOfMeta(t *testing.T) {
	tests := []struct {
		key  string
		want string // "" = not a crawl's meta key
	}{
		{"crawl:{shop}:meta", "shop"},
		{"crawl:{shop-2024.v1}:meta", "shop-2024.v1"},
		{"crawl:{shop:1}:meta", ""}, // shard 1 of shop
		{"crawl:{shop}:stats", ""},
		{"crawl:{}:meta", ""},
		{"other:{shop}:meta", ""},
	}
	for _, tc := range tests {
		got, ok := crawlOfMeta(tc.key)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("crawlOfMeta(%q) = %q, %v; want %q", tc.key, got, ok, tc.want)
		}
	}
}
