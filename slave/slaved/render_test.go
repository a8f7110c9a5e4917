package slaved_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redcrawl/redcrawl/internal/harness/testsite"
	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// shopRules is a rule file for the test site's dynamic shop: the catalogue
// and product pages are rendered (load-more clicked, images blocked), and
// products carry an item.
const shopRules = `name: shop
hosts: [%HOST%]
render:
  - match: ['/shop/$']
    wait_selector: a.product
    click: {selector: button.more, times: 5}
    block: [image]
  - match: ['/shop/product/\d+$']
    wait_selector: '#price:not(:empty)'
    block: [image]
items:
  - name: product
    match: ['/shop/product/\d+$']
    fields:
      - {name: title, css: h1}
      - {name: sku, css: 'meta[itemprop=sku]', attr: content}
      - {name: price_text, css: '#price'}
      - {name: price, json: '$.offers.price', type: number}
      - {name: availability, json: '$.offers.availability'}
      - {name: images, css: img.gallery, attr: src, list: true, type: url}
`

func chromeOrSkip(t *testing.T, cfg *config.Config) {
	t.Helper()
	if p := os.Getenv("REDCRAWL_CHROME"); p != "" {
		cfg.Render.ChromePath = p
	}
	if _, err := os.Stat(cfg.Render.ChromePath); err != nil {
		t.Skipf("no Chromium at %s (apt-get install chromium, or set REDCRAWL_CHROME): %v", cfg.Render.ChromePath, err)
	}
}

// publishRules loads a rule directory and publishes it as the master does.
func publishRules(t *testing.T, cfg *config.Config, dir string) {
	t.Helper()
	set, err := rules.LoadDir(dir, rules.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blob, err := set.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ropt, _ := cfg.RedisOptions()
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	f, err := frontier.NewRedis(context.Background(), rdb, frontier.OptionsFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.PutRules(context.Background(), set.Version, blob); err != nil {
		t.Fatal(err)
	}
}

type shopItem struct {
	Title, SKU, PriceText, Availability string
	Price                               float64
	Images                              []string
}

// TestRenderRulesExtractItems crawls the dynamic shop with its rule: the
// product links exist only after JavaScript and clicks, the price only
// after a script fills it; the crawl renders them, finds every product and
// stores its item, never loads an image, and a slave with rendering off
// (a Raspberry Pi) takes no render task. Without the rule the crawl finds
// no product at all.
func TestRenderRulesExtractItems(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	site, _, stop := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 10, Dynamic: true, Seed: 5}, 0)
	defer stop()
	shop := site.Shop()
	cu, _ := url.Parse(shop.Catalogue)

	// without the rule: the products are never found
	plain := testConfig(t, site)
	plain.Politeness.ObeyRobots = false
	chromeOrSkip(t, plain)
	crawl(t, plain, site, 1, time.Minute)
	for _, p := range shop.Products {
		if n := site.HitCounts()[p.URL]; n != 0 {
			t.Errorf("without the rule %s was fetched", p.URL)
		}
	}
	site.ResetHits()

	cfg := testConfig(t, site)
	cfg.Politeness.ObeyRobots = false
	cfg.Slave.Concurrency = 4
	chromeOrSkip(t, cfg)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(strings.ReplaceAll(shopRules, "%HOST%", cu.Hostname())), 0o644); err != nil {
		t.Fatal(err)
	}
	publishRules(t, cfg, dir)

	// a Pi-like slave alone: it crawls the static pages and leaves the
	// render tasks queued
	pi := *cfg
	pi.Render.Enabled = false
	h := newHarness(t, cfg, site)
	piRes := h.run(&pi, 1, func(st frontier.Stats) bool {
		return st.Queued == st.RenderQueued && st.RenderQueued > 0 && st.InFlight == 0
	}, time.Minute)
	for _, e := range piRes.events {
		if p := e.Page; p != nil && p.Rendered {
			t.Errorf("a slave with rendering off rendered %s", p.URL)
		}
	}
	// a render-capable slave finishes the crawl
	res := h.run(cfg, 1, nil, 3*time.Minute)
	got := map[string]shopItem{}
	rendered := 0
	for _, e := range res.events {
		if p := e.Page; p != nil && p.Rendered {
			rendered++
		}
		if it := e.Item; it != nil {
			if it.Rule != "shop" || it.Item != "product" {
				t.Errorf("item %s/%s", it.Rule, it.Item)
			}
			var d struct {
				Title, SKU, Availability string
				PriceText                string  `json:"price_text"`
				Price                    float64 `json:"price"`
				Images                   []string
			}
			if err := json.Unmarshal(it.Data, &d); err != nil {
				t.Fatalf("item data %s: %v", it.Data, err)
			}
			got[it.URL] = shopItem{d.Title, d.SKU, d.PriceText, d.Availability, d.Price, d.Images}
		}
		if x := e.Exception; x != nil && strings.HasPrefix(x.Kind, "render") {
			t.Errorf("render exception: %+v", x)
		}
	}
	want := map[string]shopItem{}
	for _, p := range shop.Products {
		w := p.Item
		want[p.URL] = shopItem{w.Title, w.SKU, w.PriceText, w.Availability, w.Price, w.Images}
	}
	if d := cmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("items (-want +got):\n%s", d)
	}
	if rendered != len(shop.Products)+1 {
		t.Errorf("%d pages rendered, want %d (catalogue and products)", rendered, len(shop.Products)+1)
	}
	for u, n := range site.HitCounts() {
		if strings.Contains(u, "/shop/img/") && n > 0 {
			t.Errorf("a blocked image was loaded: %s", u)
		}
	}
	t.Logf("%d items extracted from %d rendered pages", len(got), rendered)
}

// TestMaybeDynamic marks the shop's catalogue "maybe dynamic": fetched
// statically it has too few links, so it is rendered once; rendering finds
// the first products, the outcome is reported for the admin, and the
// products found are crawled (statically: no render rule covers them).
func TestMaybeDynamic(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	site, _, stop := startSite(t, testsite.Options{Hosts: 2, PagesPerHost: 10, Dynamic: true, Seed: 5}, 0)
	defer stop()
	shop := site.Shop()
	cu, _ := url.Parse(shop.Catalogue)
	cfg := testConfig(t, site)
	cfg.Politeness.ObeyRobots = false
	chromeOrSkip(t, cfg)
	dir := t.TempDir()
	rule := "name: shop\nhosts: [" + cu.Hostname() + "]\nrender:\n  - maybe_dynamic: {match: ['/shop/$'], min_links: 3}\n    wait_selector: a.product\n"
	if err := os.WriteFile(filepath.Join(dir, "shop.yaml"), []byte(rule), 0o644); err != nil {
		t.Fatal(err)
	}
	publishRules(t, cfg, dir)
	res := crawl(t, cfg, site, 1, 2*time.Minute)
	hits := site.HitCounts()
	found := 0
	for _, p := range shop.Products {
		if hits[p.URL] > 0 {
			found++
		}
	}
	if found != testsite.ShopPageSize {
		t.Errorf("%d products crawled, want the %d of the first page the render found", found, testsite.ShopPageSize)
	}
	reported := false
	for _, e := range res.events {
		if x := e.Exception; x != nil && x.Kind == "render" && strings.Contains(x.Message, "maybe_dynamic") &&
			strings.Contains(x.Message, "more links") {
			reported = true
		}
		if p := e.Page; p != nil && p.URL == shop.Catalogue && !p.Rendered {
			t.Errorf("the catalogue's page record is not marked rendered")
		}
	}
	if !reported {
		t.Error("the learned pattern was not reported for the admin")
	}
}
