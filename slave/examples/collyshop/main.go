// Command collyshop scrapes the products of a shop with colly: the pages
// of its catalogue API list the products, and each product page says what
// the product is. README.md shows it twice, a few lines apart: as a plain
// colly scraper (standalone/main.go) and as a redcrawl slave (main.go).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/gocolly/colly/v2"

	"github.com/redcrawl/redcrawl/slave/collyslave"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// Product is what a product page says.
type Product struct {
	URL          string   `json:"url"`
	Title        string   `json:"title"`
	SKU          string   `json:"sku"`
	Price        float64  `json:"price"`
	Availability string   `json:"availability"`
	Images       []string `json:"images"`
}

func main() {
	cfgPath := flag.String("config", "config.yaml", "redcrawl config file")
	id := flag.String("id", "", "slave id (default host-pid-random)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: collyshop [--config config.yaml] [--id ID] START_URL")
		os.Exit(2)
	}
	start, err := url.Parse(flag.Arg(0))
	if err != nil || start.Hostname() == "" {
		fmt.Fprintf(os.Stderr, "collyshop: %q is not a URL\n", flag.Arg(0))
		os.Exit(2)
	}

	c := colly.NewCollector(colly.AllowedDomains(start.Hostname()))
	c.OnRequest(func(r *colly.Request) {
		r.Headers.Set("Accept-Language", "en")
	})
	// a page of the catalogue API: its products and the next page
	c.OnResponse(func(r *colly.Response) {
		if !strings.HasPrefix(r.Headers.Get("Content-Type"), "application/json") {
			return
		}
		var page struct {
			Products []struct {
				ID int `json:"id"`
			} `json:"products"`
			Next *int `json:"next"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			log.Printf("%s: %v", r.Request.URL, err)
			return
		}
		for _, p := range page.Products {
			r.Request.Visit("/shop/product/" + strconv.Itoa(p.ID))
		}
		if page.Next != nil {
			r.Request.Visit("?page=" + strconv.Itoa(*page.Next))
		}
	})
	// a product page: its microdata and its ld+json offer
	c.OnHTML("html:has([itemtype='https://schema.org/Product'])", func(e *colly.HTMLElement) {
		p := Product{URL: e.Request.URL.String(), Title: e.ChildText("h1[itemprop=name]"),
			SKU: e.ChildAttr("meta[itemprop=sku]", "content")}
		var ld struct {
			Offers struct {
				Price        string `json:"price"`
				Availability string `json:"availability"`
			} `json:"offers"`
		}
		if err := json.Unmarshal([]byte(e.ChildText(`script[type="application/ld+json"]`)), &ld); err != nil {
			log.Printf("%s: ld+json: %v", p.URL, err)
			return
		}
		p.Price, _ = strconv.ParseFloat(ld.Offers.Price, 64)
		p.Availability = ld.Offers.Availability
		for _, src := range e.ChildAttrs("img.gallery", "src") {
			p.Images = append(p.Images, e.Request.AbsoluteURL(src))
		}
		if err := collyslave.AddItem(e.Request, "product", p.URL, p); err != nil {
			log.Printf("%s: %v", p.URL, err)
		}
	})
	c.OnError(func(r *colly.Response, err error) {
		log.Printf("%s: %v", r.Request.URL, err)
	})

	os.Exit(collyslave.Main(*cfgPath, c, slaved.Options{ID: *id}))
}
