package testsite

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// shopPrefix is the path of the shop's catalogue; every dynamic page is
// below it, on host 1.
const shopPrefix = "/shop/"

// shopHost is the host that serves the shop.
const shopHost = 1

// Facts of the dynamic pages (Options.Dynamic).
const (
	// ShopPages is the number of pages of /shop/api/products.
	ShopPages = 3
	// ShopPageSize is the number of products per API page.
	ShopPageSize = 4
	// ShopProducts is the number of products, ShopPages×ShopPageSize.
	ShopProducts = ShopPages * ShopPageSize
	// ShopImages is the number of gallery images per product.
	ShopImages = 2
	// ShopCatalogueDelay is how long after the load event the catalogue's
	// script fetches the first API page.
	ShopCatalogueDelay = 100 * time.Millisecond
	// ShopPriceDelay is how long after the load event a product page's
	// script fills #price.
	ShopPriceDelay = 200 * time.Millisecond
	// ShopMoreSelector selects the catalogue's "load more" button, which
	// is removed once the last API page is loaded.
	ShopMoreSelector = "button.more"
	// ShopProductSelector selects the product links the catalogue's
	// script inserts.
	ShopProductSelector = "a.product"
	// ShopPriceSelector selects a product page's price element, empty in
	// the served HTML.
	ShopPriceSelector = "#price"
)

// ShopItem is what a crawl extracts from a product page.
type ShopItem struct {
	// URL is the product page's absolute URL.
	URL string `json:"url"`
	// Title is the text of the page's <h1 itemprop="name">, HTML entities
	// decoded (one product's has an "&").
	Title string `json:"title"`
	// SKU is the content of <meta itemprop="sku">: "SKU-<id>".
	SKU string `json:"sku"`
	// PriceText is the text JavaScript writes into <span id="price">
	// ShopPriceDelay after load, e.g. "$1,299.00"; the served HTML has
	// the element empty, so a static fetch extracts "".
	PriceText string `json:"price_text"`
	// Price is the price as a number, e.g. 1299.0: offers.price of the
	// ld+json block (written there as the string "1299.00"), and the
	// value of PriceText.
	Price float64 `json:"price"`
	// Availability is offers.availability of the ld+json block:
	// "InStock" or "OutOfStock".
	Availability string `json:"availability"`
	// Images are the absolute URLs of the page's <img class="gallery">,
	// in order: ".../shop/img/<id>-1.png", ".../shop/img/<id>-2.png".
	Images []string `json:"images"`
}

// ShopProduct is one product of the shop.
type ShopProduct struct {
	// ID is the product's number, as the API writes it.
	ID int
	// Name is the product's name, as the API writes it (and Item.Title).
	Name string
	// URL is ".../shop/product/<id>".
	URL string
	// NeedsRender is true: only a rendering browser sees Item.PriceText.
	NeedsRender bool
	// Item is what a rendering crawl extracts from URL.
	Item ShopItem
}

// StaticItem is what a crawl that does not render extracts from the
// product page: Item without PriceText (everything else is in the served
// HTML). Its Images slice is a copy.
func (p ShopProduct) StaticItem() ShopItem {
	it := p.Item
	it.PriceText = ""
	it.Images = append([]string(nil), it.Images...)
	return it
}

// ShopInfo describes the shop of a site started with Options.Dynamic: its
// absolute URLs, all on host 1, and what a crawl makes of them. Every
// request to them is recorded in Hits; none is part of Expected.
type ShopInfo struct {
	// Catalogue is ".../shop/", linked from host 1's root. Its HTML has
	// no product link: ShopCatalogueDelay after the load event its script
	// fetches API[0] and inserts an <a class="product"
	// href="/shop/product/<id>"> per product into <ul id="products">;
	// every click on the <button class="more"> (ShopMoreSelector) fetches
	// the next API page and appends its products, and after the last
	// page the button is removed. A click before the first page has
	// loaded loads it; the button is disabled while a page loads. A
	// renderer that waits for the first page and clicks up to
	// ShopPages-1 times (ShopPages times if it does not wait) sees all
	// ShopProducts links.
	Catalogue string
	// API are ".../shop/api/products?page=1" to "?page=<ShopPages>",
	// JSON {"products":[{"id":<id>,"name":<name>},...],"next":<page+1>}
	// with "next":null on the last page. Other pages are 404.
	API []string
	// Products are the ShopProducts products in catalogue order: API
	// page 1's, then page 2's, then page 3's.
	Products []ShopProduct
	// Images are the gallery images of every product, in order; each is
	// a distinct valid 1x1 image/png. A renderer that blocks images
	// leaves no hit on them.
	Images []string
	// NeedsRender tells, for Catalogue, every API page, every product
	// URL and every image, whether a static fetch misses content that a
	// rendering browser sees: true for Catalogue and the product pages,
	// false for the API pages and the images.
	NeedsRender map[string]bool
	// CatalogueDelay is ShopCatalogueDelay and PriceDelay is
	// ShopPriceDelay.
	CatalogueDelay, PriceDelay time.Duration
	// MoreSelector, ProductSelector and PriceSelector are
	// ShopMoreSelector, ShopProductSelector and ShopPriceSelector.
	MoreSelector, ProductSelector, PriceSelector string
}

// Shop returns the URLs and expected items of the shop, or the zero
// ShopInfo if the site was started without Options.Dynamic. The result is
// the caller's to keep.
func (s *Site) Shop() ShopInfo {
	if s.shop == nil {
		return ShopInfo{}
	}
	root := s.hosts[shopHost].root
	info := ShopInfo{
		Catalogue:       root + shopPrefix,
		NeedsRender:     map[string]bool{root + shopPrefix: true},
		CatalogueDelay:  ShopCatalogueDelay,
		PriceDelay:      ShopPriceDelay,
		MoreSelector:    ShopMoreSelector,
		ProductSelector: ShopProductSelector,
		PriceSelector:   ShopPriceSelector,
	}
	for page := 1; page <= ShopPages; page++ {
		u := root + apiPath(page)
		info.API = append(info.API, u)
		info.NeedsRender[u] = false
	}
	for _, p := range s.shop.products {
		u := root + p.path()
		it := ShopItem{
			URL:          u,
			Title:        p.name,
			SKU:          p.sku(),
			PriceText:    p.priceText(),
			Price:        p.price(),
			Availability: p.availability(),
		}
		for k := 1; k <= ShopImages; k++ {
			img := root + p.imagePath(k)
			it.Images = append(it.Images, img)
			info.Images = append(info.Images, img)
			info.NeedsRender[img] = false
		}
		info.Products = append(info.Products, ShopProduct{ID: p.id, Name: p.name, URL: u, NeedsRender: true, Item: it})
		info.NeedsRender[u] = true
	}
	return info
}

// apiPath is the path and query of API page n.
func apiPath(n int) string { return shopPrefix + "api/products?page=" + strconv.Itoa(n) }

// shopProduct is a product of the shop.
type shopProduct struct {
	id    int
	name  string
	cents int64
	stock bool
	png   [ShopImages][]byte
}

func (p *shopProduct) path() string { return shopPrefix + "product/" + strconv.Itoa(p.id) }

func (p *shopProduct) imagePath(k int) string {
	return shopPrefix + "img/" + strconv.Itoa(p.id) + "-" + strconv.Itoa(k) + ".png"
}

func (p *shopProduct) sku() string { return "SKU-" + strconv.Itoa(p.id) }

// priceNumber is the price as ld+json writes it: "1299.00".
func (p *shopProduct) priceNumber() string {
	return strconv.FormatInt(p.cents/100, 10) + "." + twoDigits(p.cents%100)
}

func (p *shopProduct) price() float64 {
	f, _ := strconv.ParseFloat(p.priceNumber(), 64) // always a valid number
	return f
}

// priceText is the price as the page's script writes it: "$1,299.00".
func (p *shopProduct) priceText() string {
	d := strconv.FormatInt(p.cents/100, 10)
	var b strings.Builder
	b.WriteByte('$')
	for i := range len(d) {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(d[i])
	}
	b.WriteString("." + twoDigits(p.cents%100))
	return b.String()
}

func twoDigits(n int64) string {
	if n < 10 {
		return "0" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}

func (p *shopProduct) availability() string {
	if p.stock {
		return "InStock"
	}
	return "OutOfStock"
}

// shopData is the shop, computed once at Start.
type shopData struct {
	products []shopProduct
}

// Products' names: an adjective drawn at random and the noun of the
// product's position; one noun has an "&", to be decoded.
var (
	shopAdjectives = [...]string{"Copper", "Silver", "Quiet", "Rapid", "Gentle", "Bright", "Hollow", "Violet"}
	shopNouns      = [ShopProducts]string{
		"Lantern", "Kettle", "Backpack", "Compass", "Teapot", "Notebook",
		"Salt & Pepper Mill", "Umbrella", "Desk Lamp", "Headphones", "Skillet", "Telescope",
	}
)

// streamShop is the random stream of the shop.
const streamShop = 3

// newShopData draws the products from seed: increasing ids, names, prices
// (product i costs from $1 to $9.99 for i%4 == 0, $100 to $999.99, $1,000
// to $9,999.99 or $10,000 to $99,999.99 for i%4 == 3; whole dollars for
// i%3 == 0) and availability (products 3 and 8 are out of stock).
func newShopData(seed int64) (*shopData, error) {
	r := newRNG(seed, streamShop, shopHost, 0)
	d := &shopData{products: make([]shopProduct, ShopProducts)}
	for i := range d.products {
		p := &d.products[i]
		p.id = 1000 + 100*i + r.intn(100)
		p.name = shopAdjectives[r.intn(len(shopAdjectives))] + " " + shopNouns[i]
		lo := []int{1, 100, 1000, 10000}[i%4]
		dollars := lo + r.intn(9*lo)
		cents := r.intn(100)
		if i%3 == 0 {
			cents = 0
		}
		p.cents = int64(dollars)*100 + int64(cents)
		p.stock = i%5 != 3
		for k := range ShopImages {
			img, err := tinyPNG(byte(p.id), byte(p.id>>8), byte(k+1))
			if err != nil {
				return nil, err
			}
			p.png[k] = img
		}
	}
	return d, nil
}

// tinyPNG returns a valid 1x1 RGB PNG of one colour.
func tinyPNG(red, green, blue byte) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data))) // writes to a bytes.Buffer don't fail
		b.WriteString(typ)
		b.Write(data)
		crc := crc32.Update(crc32.ChecksumIEEE([]byte(typ)), crc32.IEEETable, data)
		_ = binary.Write(&b, binary.BigEndian, crc)
	}
	// 1x1, 8-bit RGB, deflate, no filter, no interlace.
	chunk("IHDR", []byte{0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0})
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	if _, err := zw.Write([]byte{0, red, green, blue}); err != nil { // filter none, one pixel
		return nil, fmt.Errorf("png: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("png: %w", err)
	}
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return b.Bytes(), nil
}

// shopPage is which dynamic page a request names.
type shopPage uint8

const (
	spNotFound shopPage = iota
	spCatalogue
	spAPI     // i: API page
	spProduct // i: index into shopData.products
	spImage   // i: product index, k: image 1..ShopImages
)

// shopRoute is a parsed request for a dynamic page.
type shopRoute struct {
	page   shopPage
	status int
	i, k   int
}

// shopRoute parses a request for shopPrefix + rest with query.
func (s *Site) shopRoute(rest, query string) shopRoute {
	ok := func(p shopPage, i, k int) shopRoute { return shopRoute{page: p, status: http.StatusOK, i: i, k: k} }
	switch {
	case rest == "" && query == "":
		return ok(spCatalogue, 0, 0)
	case rest == "api/products":
		if q, err := url.ParseQuery(query); err == nil && len(q) == 1 && len(q["page"]) == 1 {
			if n, valid := parseIndex(q.Get("page")); valid && n >= 1 && n <= ShopPages {
				return ok(spAPI, n, 0)
			}
		}
	case strings.HasPrefix(rest, "product/") && query == "":
		if id, valid := parseIndex(rest[len("product/"):]); valid {
			if i := s.shop.index(id); i >= 0 {
				return ok(spProduct, i, 0)
			}
		}
	case strings.HasPrefix(rest, "img/") && strings.HasSuffix(rest, ".png") && query == "":
		idk := strings.TrimSuffix(rest[len("img/"):], ".png")
		ids, ks, found := strings.Cut(idk, "-")
		id, ok1 := parseIndex(ids)
		k, ok2 := parseIndex(ks)
		if found && ok1 && ok2 && k >= 1 && k <= ShopImages {
			if i := s.shop.index(id); i >= 0 {
				return ok(spImage, i, k)
			}
		}
	}
	return shopRoute{page: spNotFound, status: http.StatusNotFound}
}

// index is the index of the product with id, or -1.
func (d *shopData) index(id int) int {
	for i := range d.products {
		if d.products[i].id == id {
			return i
		}
	}
	return -1
}

// serveShop answers a request for a dynamic page; the hit is recorded.
func (s *Site) serveShop(w http.ResponseWriter, r *http.Request, sr shopRoute) {
	const htmlType = "text/html; charset=utf-8"
	var b bytes.Buffer
	switch sr.page {
	case spCatalogue:
		renderCatalogue(&b)
		s.write(w, r, sr.status, htmlType, b.Bytes())
	case spAPI:
		body, err := s.shop.apiPage(sr.i)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // the hit says 200; never happens
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		s.write(w, r, sr.status, "application/json", body)
	case spProduct:
		if err := s.shop.renderProduct(&b, sr.i); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // never happens
			return
		}
		s.write(w, r, sr.status, htmlType, b.Bytes())
	case spImage:
		s.write(w, r, sr.status, "image/png", s.shop.products[sr.i].png[sr.k-1])
	default:
		s.write(w, r, sr.status, "text/plain; charset=utf-8", []byte("404 page not found\n"))
	}
}

// apiProduct and apiPage are the JSON of the API.
type apiProduct struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

type apiPage struct {
	Products []apiProduct `json:"products"`
	Next     *int         `json:"next"`
}

// apiPage returns the JSON of API page n, 1..ShopPages.
func (d *shopData) apiPage(n int) ([]byte, error) {
	var page apiPage
	for _, p := range d.products[(n-1)*ShopPageSize : n*ShopPageSize] {
		page.Products = append(page.Products, apiProduct{ID: p.id, Name: p.name})
	}
	if n < ShopPages {
		next := n + 1
		page.Next = &next
	}
	b, err := json.Marshal(page)
	if err != nil {
		return nil, fmt.Errorf("shop api: %w", err)
	}
	return append(b, '\n'), nil
}

// catalogueScript loads the API pages into the catalogue: the first
// ShopCatalogueDelay after load (or on a click before that), the next on
// every click of the "load more" button, which goes after the last.
var catalogueScript = `<script>
(function () {
  "use strict";
  var api = "/shop/api/products?page=";
  var list = document.getElementById("products");
  var more = document.querySelector("` + ShopMoreSelector + `");
  var next = 1;
  var busy = false;
  function load() {
    if (busy || next === null) {
      return;
    }
    busy = true;
    more.disabled = true;
    fetch(api + next, {headers: {"Accept": "application/json"}})
      .then(function (resp) {
        if (!resp.ok) {
          throw new Error("HTTP " + resp.status);
        }
        return resp.json();
      })
      .then(function (data) {
        data.products.forEach(function (p) {
          var li = document.createElement("li");
          var a = document.createElement("a");
          a.className = "product";
          a.setAttribute("href", "/shop/product/" + p.id);
          a.textContent = p.name;
          li.appendChild(a);
          list.appendChild(li);
        });
        next = data.next;
        if (next === null) {
          more.remove();
        }
      })
      .catch(function (err) {
        document.getElementById("status").textContent = "Could not load the products: " + err;
      })
      .finally(function () {
        busy = false;
        more.disabled = false;
      });
  }
  more.addEventListener("click", load);
  window.addEventListener("load", function () {
    setTimeout(function () {
      if (next === 1) {
        load();
      }
    }, ` + strconv.Itoa(int(ShopCatalogueDelay/time.Millisecond)) + `);
  });
})();
</script>
`

// renderCatalogue writes the catalogue page: no product link in the HTML.
func renderCatalogue(b *bytes.Buffer) {
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n" +
		"<title>Shop catalogue</title>\n</head>\n<body>\n<h1>Shop catalogue</h1>\n" +
		"<p><a href=\"/\">Home</a></p>\n" +
		"<noscript><p>This catalogue needs JavaScript.</p></noscript>\n" +
		"<ul id=\"products\"></ul>\n<p id=\"status\"></p>\n" +
		"<button class=\"more\" type=\"button\">Load more</button>\n")
	b.WriteString(catalogueScript)
	b.WriteString("</body>\n</html>\n")
}

// ldProduct is a product page's ld+json block.
type ldProduct struct {
	Context string  `json:"@context"`
	Type    string  `json:"@type"`
	Name    string  `json:"name"`
	SKU     string  `json:"sku"`
	Offers  ldOffer `json:"offers"`
}

type ldOffer struct {
	Type          string `json:"@type"`
	Price         string `json:"price"`
	PriceCurrency string `json:"priceCurrency"`
	Availability  string `json:"availability"`
}

// priceScript fills #price from the cents written before it, formatted
// "$1,299.00", ShopPriceDelay after load. The served HTML has neither the
// formatted price nor the element's text.
var priceScript = `  function money(c) {
    var d = String(Math.floor(c / 100));
    var r = c % 100;
    var out = "";
    while (d.length > 3) {
      out = "," + d.slice(-3) + out;
      d = d.slice(0, -3);
    }
    return "$" + d + out + "." + (r < 10 ? "0" : "") + r;
  }
  window.addEventListener("load", function () {
    setTimeout(function () {
      document.getElementById("price").textContent = money(cents);
    }, ` + strconv.Itoa(int(ShopPriceDelay/time.Millisecond)) + `);
  });
})();
</script>
`

// renderProduct writes the page of product i.
func (d *shopData) renderProduct(b *bytes.Buffer, i int) error {
	p := &d.products[i]
	ld, err := json.Marshal(ldProduct{
		Context: "https://schema.org",
		Type:    "Product",
		Name:    p.name,
		SKU:     p.sku(),
		Offers: ldOffer{Type: "Offer", Price: p.priceNumber(), PriceCurrency: "USD",
			Availability: p.availability()},
	})
	if err != nil {
		return fmt.Errorf("shop ld+json: %w", err)
	}
	name := html.EscapeString(p.name)
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>")
	b.WriteString(name)
	b.WriteString(" | Shop</title>\n<script type=\"application/ld+json\">\n")
	b.Write(ld) // json.Marshal escapes <, > and &
	b.WriteString("\n</script>\n</head>\n<body>\n<div itemscope itemtype=\"https://schema.org/Product\">\n<h1 itemprop=\"name\">")
	b.WriteString(name)
	b.WriteString("</h1>\n<meta itemprop=\"sku\" content=\"")
	b.WriteString(p.sku())
	b.WriteString("\">\n<p>Price: <span id=\"price\" class=\"price\"></span></p>\n<div class=\"images\">\n")
	for k := 1; k <= ShopImages; k++ {
		b.WriteString("<img class=\"gallery\" src=\"" + p.imagePath(k) + "\" alt=\"" + name + ", view " +
			strconv.Itoa(k) + "\" width=\"1\" height=\"1\">\n")
	}
	b.WriteString("</div>\n</div>\n<p><a href=\"" + shopPrefix + "\">Back to the catalogue</a></p>\n")
	b.WriteString("<script>\n(function () {\n  \"use strict\";\n  var cents = " + strconv.FormatInt(p.cents, 10) + ";\n")
	b.WriteString(priceScript)
	b.WriteString("</body>\n</html>\n")
	return nil
}
