package testsite

import (
	"bytes"
	"encoding/json"
	"image/png"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// shopSite starts a small site with the dynamic pages.
func shopSite(t testing.TB, opts Options) (*Site, ShopInfo) {
	t.Helper()
	opts.Dynamic = true
	s := start(t, opts)
	return s, s.Shop()
}

func TestShopOff(t *testing.T) {
	opts := Options{Hosts: 3, PagesPerHost: 30, Robots: true, Specials: true, Hostile: true, Seed: 4}
	off := start(t, opts)
	if diff := cmp.Diff(ShopInfo{}, off.Shop()); diff != "" {
		t.Errorf("Shop() without Options.Dynamic (-want +got):\n%s", diff)
	}
	opts.Dynamic = true
	on, shop := shopSite(t, opts)
	c := newClient(t)

	// Every URL of the shop, on the site without it, is a 404.
	host1 := strings.TrimSuffix(on.HostURLs()[1], "/")
	for _, u := range append(append(append([]string{shop.Catalogue}, shop.API...), shop.Images...), shop.Products[0].URL) {
		u = strings.Replace(u, host1, strings.TrimSuffix(off.HostURLs()[1], "/"), 1)
		if r := fetch(t, c, u); r.status != 404 {
			t.Errorf("Dynamic off: GET %s: %d, want 404", u, r.status)
		}
	}
	if bytes.Contains(fetch(t, c, off.HostURLs()[1]).body, []byte("/shop/")) {
		t.Error("host 1's root links to the shop without Options.Dynamic")
	}

	if diff := cmp.Diff(hostNumbers(off, off.Expected()), hostNumbers(on, on.Expected())); diff != "" {
		t.Errorf("Expected changes with Options.Dynamic (-off +on):\n%s", diff)
	}
	for u := range on.Expected() {
		if strings.Contains(u, "/shop/") {
			t.Errorf("Expected has %s", u)
		}
	}
	// Only host 1's root changes: it links to the catalogue.
	for h := range 3 {
		for _, p := range []int{0, 1, 2, 14} {
			a, b := fetch(t, c, off.PageURL(h, p)).body, fetch(t, c, on.PageURL(h, p)).body
			if h == 1 && p == 0 {
				if !slices.Contains(links(t, on.PageURL(1, 0), b), shop.Catalogue) {
					t.Errorf("host 1's root doesn't link to %s", shop.Catalogue)
				}
				continue
			}
			if diff := cmp.Diff(string(hostNumbersText(off, a)), string(hostNumbersText(on, b))); diff != "" {
				t.Errorf("page %d of host %d changes with Options.Dynamic (-off +on):\n%s", p, h, diff)
			}
		}
	}
	if !strings.HasPrefix(shop.Catalogue, "http://127.0.0.3:") {
		t.Errorf("catalogue %s is not on 127.0.0.3", shop.Catalogue)
	}
	for _, p := range []string{"shop/", "shop/api/products?page=1"} {
		if r := fetch(t, c, on.HostURLs()[0]+p); r.status != 404 {
			t.Errorf("%s on host 0: %d, want 404", p, r.status)
		}
	}

	if s, err := Start(Options{Hosts: 1, Dynamic: true}); err == nil {
		s.Close()
		t.Error("Start with Dynamic and 1 host succeeded")
	} else if !strings.Contains(err.Error(), "at least 2 hosts") {
		t.Errorf("Start with Dynamic and 1 host: %v", err)
	}
}

// hostNumbersText replaces the addresses of s's hosts in b by "HOST<i>".
func hostNumbersText(s *Site, b []byte) []byte {
	for i, root := range s.HostURLs() {
		addr := strings.TrimPrefix(strings.TrimSuffix(root, "/"), "http://")
		b = bytes.ReplaceAll(b, []byte(addr), []byte("HOST"+strconv.Itoa(i)))
	}
	return b
}

func TestShopCatalogueStatic(t *testing.T) {
	s, shop := shopSite(t, Options{Hosts: 2, PagesPerHost: 5, Gzip: true})
	c := newClient(t)
	r := fetch(t, c, shop.Catalogue)
	if r.status != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("catalogue: %d %q", r.status, r.header.Get("Content-Type"))
	}
	// The only link is home; no product link, not even as text.
	if diff := cmp.Diff([]string{s.HostURLs()[1]}, links(t, shop.Catalogue, r.body)); diff != "" {
		t.Errorf("catalogue links (-want +got):\n%s", diff)
	}
	for _, p := range shop.Products {
		if bytes.Contains(r.body, []byte(strconv.Itoa(p.ID))) || bytes.Contains(r.body, []byte(p.Name)) {
			t.Errorf("catalogue mentions product %d %q", p.ID, p.Name)
		}
	}
	doc := parseHTML(t, r.body)
	if n := len(findAll(doc, "a", "class", "product")); n != 0 {
		t.Errorf("%d a.product in the served catalogue", n)
	}
	if n := len(findAll(doc, "button", "class", "more")); n != 1 {
		t.Errorf("%d button.more, want 1", n)
	}
	if n := len(findAll(doc, "ul", "id", "products")); n != 1 {
		t.Errorf("%d ul#products, want 1", n)
	}
	js := scripts(doc, "")
	if len(js) != 1 {
		t.Fatalf("%d scripts, want 1", len(js))
	}
	for _, want := range []string{
		`"/shop/api/products?page="`, `fetch(api + next`, `setTimeout(`, "}, 100);", `"button.more"`,
		`more.addEventListener("click", load)`, `more.remove()`, `a.className = "product"`,
		`"/shop/product/" + p.id`, `next = data.next`,
	} {
		if !strings.Contains(js[0], want) {
			t.Errorf("catalogue script lacks %s", want)
		}
	}
	if got := []any{shop.CatalogueDelay.Milliseconds(), shop.PriceDelay.Milliseconds(), shop.MoreSelector,
		shop.ProductSelector, shop.PriceSelector}; !cmp.Equal(got, []any{int64(100), int64(200), "button.more", "a.product", "#price"}) {
		t.Errorf("facts: %v", got)
	}
	// HEAD, gzip and the method check apply as everywhere.
	resp, err := c.Head(shop.Catalogue)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength <= 0 {
		t.Errorf("HEAD catalogue: %d %d", resp.StatusCode, resp.ContentLength)
	}
	if r := fetch(t, c, shop.Catalogue, "Accept-Encoding", "gzip"); r.header.Get("Content-Encoding") != "gzip" {
		t.Errorf("catalogue not gzipped: %v", r.header)
	}
	resp, err = c.Post(shop.API[0], "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST api: %d", resp.StatusCode)
	}
}

// apiPageJSON is a page of the shop's API.
type apiPageJSON struct {
	Products []struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	} `json:"products"`
	Next *int `json:"next"`
}

func TestShopAPI(t *testing.T) {
	_, shop := shopSite(t, Options{Hosts: 2, PagesPerHost: 5, Seed: 8})
	c := newClient(t)
	// Do what the catalogue's script does: page 1, then "next" until null.
	cat, err := url.Parse(shop.Catalogue)
	if err != nil {
		t.Fatal(err)
	}
	var got []ShopProduct
	var pages []string
	next := 1
	for range ShopPages + 1 {
		u := cat.ResolveReference(&url.URL{Path: "/shop/api/products", RawQuery: "page=" + strconv.Itoa(next)}).String()
		pages = append(pages, u)
		r := fetch(t, c, u)
		if r.status != 200 || r.header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %d %q", u, r.status, r.header.Get("Content-Type"))
		}
		var page apiPageJSON
		dec := json.NewDecoder(bytes.NewReader(r.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&page); err != nil {
			t.Fatalf("GET %s: %v in %q", u, err, r.body)
		}
		if len(page.Products) != ShopPageSize {
			t.Errorf("GET %s: %d products, want %d", u, len(page.Products), ShopPageSize)
		}
		for _, p := range page.Products {
			got = append(got, ShopProduct{ID: p.ID, Name: p.Name, URL: cat.ResolveReference(&url.URL{Path: "/shop/product/" + strconv.Itoa(p.ID)}).String()})
		}
		if page.Next == nil {
			break
		}
		if *page.Next != next+1 {
			t.Fatalf("GET %s: next %d", u, *page.Next)
		}
		next = *page.Next
	}
	if diff := cmp.Diff(shop.API, pages); diff != "" {
		t.Errorf("API pages (-Shop +chain):\n%s", diff)
	}
	want := make([]ShopProduct, len(shop.Products))
	for i, p := range shop.Products {
		want[i] = ShopProduct{ID: p.ID, Name: p.Name, URL: p.URL}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("products (-Shop +API):\n%s", diff)
	}
	if len(got) != ShopProducts {
		t.Errorf("%d products, want %d", len(got), ShopProducts)
	}
	ids := map[int]bool{}
	for _, p := range got {
		ids[p.ID] = true
	}
	if len(ids) != ShopProducts {
		t.Errorf("%d distinct ids", len(ids))
	}

	root := strings.TrimSuffix(shop.Catalogue, "/shop/")
	for _, p := range []string{
		"api/products", "api/products?page=0", "api/products?page=4", "api/products?page=01",
		"api/products?page=1&x=2", "api/products?page=1&page=2", "api/products?page=x", "api/products/",
		"?page=1", "product/", "product/" + strconv.Itoa(got[0].ID+1) + "0", "product/0" + strconv.Itoa(got[0].ID),
		"product/" + strconv.Itoa(got[0].ID) + "/", "img/" + strconv.Itoa(got[0].ID) + "-3.png",
		"img/" + strconv.Itoa(got[0].ID) + "-0.png", "img/" + strconv.Itoa(got[0].ID) + ".png", "nope",
	} {
		if r := fetch(t, c, root+"/shop/"+p); r.status != 404 {
			t.Errorf("GET /shop/%s: %d, want 404", p, r.status)
		}
	}
	if r := fetch(t, c, root+"/shop"); r.status != 404 {
		t.Errorf("GET /shop: %d, want 404", r.status)
	}
	// Another seed, another shop.
	_, other := shopSite(t, Options{Hosts: 2, PagesPerHost: 5, Seed: 9})
	if other.Products[0].ID == shop.Products[0].ID && other.Products[1].ID == shop.Products[1].ID &&
		other.Products[0].Item.Price == shop.Products[0].Item.Price {
		t.Error("seeds 8 and 9 have the same shop")
	}
}

// parseHTML parses an HTML document.
func parseHTML(t testing.TB, b []byte) *html.Node {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// attr returns n's attribute key.
func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// findAll returns the elements named tag whose attribute key is val
// (class: one of its classes); key "" matches any element named tag.
func findAll(n *html.Node, tag, key, val string) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type != html.ElementNode || d.Data != tag {
			continue
		}
		v, ok := attr(d, key)
		switch {
		case key == "":
		case !ok:
			continue
		case key == "class" && slices.Contains(strings.Fields(v), val):
		case v != val:
			continue
		}
		out = append(out, d)
	}
	return out
}

// textOf is the text content of n.
func textOf(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}

// scripts returns the text of the <script> elements whose type is typ.
func scripts(doc *html.Node, typ string) []string {
	var out []string
	for _, n := range findAll(doc, "script", "", "") {
		if v, _ := attr(n, "type"); v == typ {
			out = append(out, textOf(n))
		}
	}
	return out
}

// ldJSON is a product page's ld+json block.
type ldJSON struct {
	Context string `json:"@context"`
	Type    string `json:"@type"`
	Name    string `json:"name"`
	SKU     string `json:"sku"`
	Offers  struct {
		Type          string `json:"@type"`
		Price         string `json:"price"`
		PriceCurrency string `json:"priceCurrency"`
		Availability  string `json:"availability"`
	} `json:"offers"`
}

var centsRE = regexp.MustCompile(`var cents = (\d+);`)

func TestShopProducts(t *testing.T) {
	for _, seed := range []int64{0, 8, -3} {
		s, shop := shopSite(t, Options{Hosts: 2, PagesPerHost: 5, Seed: seed})
		c := newClient(t)
		stock := map[string]int{}
		var extracted []ShopItem
		for _, p := range shop.Products {
			r := fetch(t, c, p.URL)
			if r.status != 200 || r.header.Get("Content-Type") != "text/html; charset=utf-8" {
				t.Fatalf("GET %s: %d %q", p.URL, r.status, r.header.Get("Content-Type"))
			}
			doc := parseHTML(t, r.body)
			pu, _ := url.Parse(p.URL)
			it := ShopItem{URL: p.URL}
			if h1 := findAll(doc, "h1", "itemprop", "name"); len(h1) == 1 {
				it.Title = textOf(h1[0])
			} else {
				t.Errorf("%s: %d h1", p.URL, len(h1))
			}
			if m := findAll(doc, "meta", "itemprop", "sku"); len(m) == 1 {
				it.SKU, _ = attr(m[0], "content")
			} else {
				t.Errorf("%s: %d sku", p.URL, len(m))
			}
			price := findAll(doc, "span", "id", "price")
			if len(price) != 1 || price[0].FirstChild != nil {
				t.Errorf("%s: #price %d elements, want 1 empty", p.URL, len(price))
			}
			ld := scripts(doc, "application/ld+json")
			if len(ld) != 1 {
				t.Fatalf("%s: %d ld+json", p.URL, len(ld))
			}
			var l ldJSON
			dec := json.NewDecoder(strings.NewReader(ld[0]))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&l); err != nil {
				t.Fatalf("%s: ld+json: %v", p.URL, err)
			}
			if l.Type != "Product" || l.Offers.Type != "Offer" || l.Name != it.Title || l.SKU != it.SKU || l.Offers.PriceCurrency != "USD" {
				t.Errorf("%s: ld+json %+v", p.URL, l)
			}
			if !regexp.MustCompile(`^\d+\.\d\d$`).MatchString(l.Offers.Price) {
				t.Errorf("%s: price %q", p.URL, l.Offers.Price)
			}
			var err error
			if it.Price, err = strconv.ParseFloat(l.Offers.Price, 64); err != nil {
				t.Errorf("%s: price %q: %v", p.URL, l.Offers.Price, err)
			}
			it.Availability = l.Offers.Availability
			stock[it.Availability]++
			for _, img := range findAll(doc, "img", "class", "gallery") {
				src, _ := attr(img, "src")
				ref, err := pu.Parse(src)
				if err != nil {
					t.Fatalf("%s: img %q: %v", p.URL, src, err)
				}
				it.Images = append(it.Images, ref.String())
			}
			if diff := cmp.Diff(p.StaticItem(), it); diff != "" {
				t.Errorf("static item of %s (-StaticItem +served):\n%s", p.URL, diff)
			}

			// The price script: cents, formatted after ShopPriceDelay.
			js := scripts(doc, "")
			if len(js) != 1 || !strings.Contains(js[0], "setTimeout(") || !strings.Contains(js[0], "}, 200);") ||
				!strings.Contains(js[0], `document.getElementById("price").textContent = money(cents)`) {
				t.Fatalf("%s: price script %q", p.URL, js)
			}
			m := centsRE.FindStringSubmatch(js[0])
			if m == nil {
				t.Fatalf("%s: no cents in the script", p.URL)
			}
			cents, _ := strconv.ParseInt(m[1], 10, 64)
			it.PriceText = "$" + message.NewPrinter(language.English).Sprintf("%.2f", float64(cents)/100)
			if float64(cents)/100 != it.Price {
				t.Errorf("%s: script's %d cents, ld+json's %v", p.URL, cents, it.Price)
			}
			if bytes.Contains(r.body, []byte(it.PriceText)) {
				t.Errorf("%s: served HTML has the price text %s", p.URL, it.PriceText)
			}
			if diff := cmp.Diff(p.Item, it); diff != "" {
				t.Errorf("rendered item of %s (-Item +expected):\n%s", p.URL, diff)
			}
			if p.Name != it.Title || !p.NeedsRender || !shop.NeedsRender[p.URL] || len(it.Images) != ShopImages {
				t.Errorf("%s: %+v", p.URL, p)
			}
			extracted = append(extracted, it)
		}
		if stock["InStock"] == 0 || stock["OutOfStock"] == 0 {
			t.Errorf("seed %d: availability %v", seed, stock)
		}
		var amp, comma bool
		for _, it := range extracted {
			amp = amp || strings.Contains(it.Title, "&")
			comma = comma || strings.Contains(it.PriceText, ",")
		}
		if !amp || !comma {
			t.Errorf("seed %d: no title with & (%v) or price with a comma (%v)", seed, amp, comma)
		}

		// No page fetch loaded an image: the hits show it.
		for _, h := range s.Hits() {
			if strings.HasPrefix(h.Path, "/shop/img/") {
				t.Errorf("hit on %s", h.URL())
			}
		}
		var all []string
		seen := map[string]bool{}
		for _, p := range shop.Products {
			all = append(all, p.Item.Images...)
		}
		if diff := cmp.Diff(all, shop.Images); diff != "" {
			t.Errorf("Images (-products +Images):\n%s", diff)
		}
		for _, u := range shop.Images {
			r := fetch(t, c, u)
			if r.status != 200 || r.header.Get("Content-Type") != "image/png" {
				t.Errorf("GET %s: %d %q", u, r.status, r.header.Get("Content-Type"))
			}
			img, err := png.Decode(bytes.NewReader(r.body))
			if err != nil || img.Bounds().Dx() != 1 || img.Bounds().Dy() != 1 {
				t.Errorf("GET %s: %v", u, err)
			}
			if seen[string(r.body)] {
				t.Errorf("GET %s: same bytes as another image", u)
			}
			seen[string(r.body)] = true
			if shop.NeedsRender[u] {
				t.Errorf("NeedsRender[%s]", u)
			}
		}
		if n := s.HitCounts()[shop.Images[0]]; n != 1 {
			t.Errorf("%d hits on %s, want 1", n, shop.Images[0])
		}
	}
}

func TestShopInfo(t *testing.T) {
	_, shop := shopSite(t, Options{Hosts: 4, PagesPerHost: 5})
	if len(shop.API) != ShopPages || len(shop.Products) != ShopProducts || len(shop.Images) != ShopProducts*ShopImages {
		t.Fatalf("%d API pages, %d products, %d images", len(shop.API), len(shop.Products), len(shop.Images))
	}
	want := map[string]bool{shop.Catalogue: true}
	for _, u := range shop.API {
		want[u] = false
	}
	for _, p := range shop.Products {
		want[p.URL] = true
		if p.Item.URL != p.URL || p.Item.SKU != "SKU-"+strconv.Itoa(p.ID) || p.Item.Title != p.Name {
			t.Errorf("product %+v", p)
		}
		if st := p.StaticItem(); st.PriceText != "" || p.Item.PriceText == "" || !cmp.Equal(st.Images, p.Item.Images) {
			t.Errorf("StaticItem of %s: %+v", p.URL, st)
		}
	}
	for _, u := range shop.Images {
		want[u] = false
	}
	if diff := cmp.Diff(want, shop.NeedsRender); diff != "" {
		t.Errorf("NeedsRender (-want +got):\n%s", diff)
	}
	// The result is the caller's: changing it changes nothing.
	s2, _ := shopSite(t, Options{Hosts: 2, PagesPerHost: 5})
	a := s2.Shop()
	a.Products[0].Item.Images[0] = "x"
	a.NeedsRender["x"] = true
	if b := s2.Shop(); b.Products[0].Item.Images[0] == "x" || b.NeedsRender["x"] {
		t.Error("Shop() shares its result")
	}
	b, err := json.Marshal(shop.Products[0].Item)
	if err != nil || !strings.Contains(string(b), `"price_text":"$`) {
		t.Errorf("item JSON %s: %v", b, err)
	}
}

// TestShopHits checks that requests to the shop are recorded as usual.
func TestShopHits(t *testing.T) {
	s, shop := shopSite(t, Options{Hosts: 2, PagesPerHost: 5})
	c := newClient(t)
	fetch(t, c, shop.Catalogue, "User-Agent", "render/1")
	fetch(t, c, shop.API[0])
	fetch(t, c, shop.Products[3].URL)
	var got []string
	for _, h := range s.Hits() {
		got = append(got, h.URL()+" "+strconv.Itoa(h.Status))
	}
	want := []string{shop.Catalogue + " 200", shop.API[0] + " 200", shop.Products[3].URL + " 200"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hits (-want +got):\n%s", diff)
	}
	if ua := s.Hits()[0].UserAgent; ua != "render/1" {
		t.Errorf("user agent %q", ua)
	}
}
