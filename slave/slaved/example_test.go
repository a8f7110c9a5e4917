package slaved_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

// exampleSlave is a slave for a site on loopback, as the examples use it.
func exampleSlave() *slaved.Slave {
	cfg := config.Default()
	cfg.Crawl.AllowHosts = []string{"127.0.0.1"}
	cfg.Fetch.AllowPrivateNetworks = true // the examples' sites are on loopback
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	s, err := slaved.New(&cfg, slaved.Options{ID: "example", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	return s
}

// A slave of your own: package main builds a slave from the config,
// registers its hooks and runs until SIGINT or SIGTERM, as the stock
// slave does (slave/examples/jsonapi is a complete program).
func Example() {
	cfg, err := config.Load("config.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(config.ExitCode(err))
	}
	s, err := slaved.New(cfg, slaved.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s.OnRequest(func(ctx context.Context, r *slaved.Request) error {
		r.Header.Set("X-Api-Key", os.Getenv("API_KEY"))
		return nil
	})
	s.OnItem(func(ctx context.Context, it *slaved.Item) error {
		return json.NewEncoder(os.Stdout).Encode(it.Fields) // a sink
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := s.Run(ctx); err != nil {
		os.Exit(1)
	}
}

// OnRequest signs every request and skips the pages a crawl must not
// fetch.
func ExampleSlave_OnRequest() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "<p>members only</p>")
	}))
	defer site.Close()

	s := exampleSlave()
	s.OnRequest(func(ctx context.Context, r *slaved.Request) error {
		if strings.HasPrefix(r.URL.Path, "/logout") {
			r.Skip("never log out")
			return nil
		}
		r.Header.Set("Authorization", "Bearer s3cret")
		return nil
	})
	for _, path := range []string{"/members", "/logout"} {
		res, err := s.FetchOne(context.Background(), site.URL+path)
		if err != nil {
			panic(err)
		}
		fmt.Println(path, res.Outcome, res.Status)
		for _, e := range res.Exceptions {
			fmt.Println("  exception:", e.Kind, e.Message)
		}
	}
	// Output:
	// /members done 200
	// /logout done 0
	//   exception: hook OnRequest: skipped: never log out
}

// OnFetch wraps the fetch: here a request made by another library
// (slave/collyslave lets a colly collector make it), sent with the
// slave's sessions, proxies and politeness; a page the library gives up
// is skipped without a request.
func ExampleSlave_OnFetch() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<p>signed %s</p>", r.Header.Get("X-Signature"))
	}))
	defer site.Close()

	s := exampleSlave()
	s.OnFetch(func(ctx context.Context, r *slaved.Request, fetch slaved.FetchFunc) (*slaved.Response, error) {
		if strings.HasSuffix(r.URL.Path, ".pdf") {
			r.Skip("no PDFs")
			return nil, nil
		}
		res, err := fetch(ctx, http.Header{"X-Signature": {"sig-" + r.URL.Path[1:]}})
		if err != nil {
			return nil, err // a fetch error: the slave retries or fails the task
		}
		body, _ := res.Body.Bytes()
		fmt.Printf("%s %d %s\n", r.URL.Path, res.Status, body)
		return res, nil
	})
	for _, path := range []string{"/page", "/paper.pdf"} {
		res, err := s.FetchOne(context.Background(), site.URL+path)
		if err != nil {
			panic(err)
		}
		fmt.Println(path, res.Outcome, res.Status)
	}
	// Output:
	// /page 200 <p>signed sig-page</p>
	// /page done 200
	// /paper.pdf done 0
}

// OnResponse follows a paginated JSON API: the items of each page become
// items, its "next" link a link; a page that says "try later" is retried.
func ExampleSlave_OnResponse() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("page") {
		case "1":
			fmt.Fprint(w, `{"products":[{"id":1,"name":"Kettle"},{"id":2,"name":"Toaster"}],"next":"/api?page=2"}`)
		default:
			fmt.Fprint(w, `{"error":"busy, try later"}`)
		}
	}))
	defer site.Close()

	s := exampleSlave()
	s.OnResponse(func(ctx context.Context, p *slaved.Page) error {
		if p.Status != http.StatusOK || !strings.HasPrefix(p.Header.Get("Content-Type"), "application/json") {
			return nil // the slave's own handling
		}
		body, err := p.Body()
		if err != nil {
			return err // recorded; the task is retried
		}
		var doc struct {
			Products []struct {
				ID   int    `json:"id"`
				Name string `json:"name"`
			} `json:"products"`
			Next  string `json:"next"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return fmt.Errorf("decode %s: %w", p.URL, err)
		}
		if doc.Error != "" {
			p.Retry(doc.Error)
			return nil
		}
		for _, pr := range doc.Products {
			p.AddItem("product", "/api/products/"+strconv.Itoa(pr.ID), map[string]any{"name": pr.Name})
		}
		if doc.Next != "" {
			p.AddLink(doc.Next)
		}
		return nil
	})
	for _, path := range []string{"/api?page=1", "/api?page=2"} {
		res, err := s.FetchOne(context.Background(), site.URL+path)
		if err != nil {
			panic(err)
		}
		fmt.Println(path, res.Outcome)
		for _, l := range res.Links {
			fmt.Println("  link:", strings.TrimPrefix(l, site.URL))
		}
		for _, it := range res.Items {
			fmt.Printf("  item: %s %s %s\n", it.Item, it.URL, it.Data)
		}
		for _, e := range res.Exceptions {
			fmt.Println("  exception:", e.Kind, e.Message)
		}
	}
	// Output:
	// /api?page=1 done
	//   link: /api?page=2
	//   item: product /api/products/1 {"name":"Kettle"}
	//   item: product /api/products/2 {"name":"Toaster"}
	// /api?page=2 retry
	//   exception: hook OnResponse: retry: busy, try later
}

// OnItem builds an item pipeline: a transform cleans the fields, a filter
// drops items, a sink sends them elsewhere (here a slice; Kafka or S3 in
// a real slave). An error drops the item with an item_pipeline exception.
func ExampleSlave_OnItem() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "  Kettle ;12.50\nToaster;0\nLamp;n/a\n")
	}))
	defer site.Close()

	s := exampleSlave()
	// each line of the page is an item
	s.OnResponse(func(ctx context.Context, p *slaved.Page) error {
		body, err := p.Body()
		if err != nil {
			return err
		}
		for i, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
			name, price, _ := strings.Cut(line, ";")
			p.AddItem("product", "#"+strconv.Itoa(i), map[string]any{"name": name, "price": price})
		}
		return nil
	})
	// transform: trim the name, parse the price
	s.OnItem(func(ctx context.Context, it *slaved.Item) error {
		it.Fields["name"] = strings.TrimSpace(it.Fields["name"].(string))
		price, err := strconv.ParseFloat(it.Fields["price"].(string), 64)
		if err != nil {
			return fmt.Errorf("price of %s: %w", it.Fields["name"], err)
		}
		it.Fields["price"] = price
		return nil
	})
	// filter: nothing given away
	s.OnItem(func(ctx context.Context, it *slaved.Item) error {
		if it.Fields["price"] == 0.0 {
			return slaved.ErrDropItem
		}
		return nil
	})
	// sink: hooks run concurrently, so the slice is guarded
	var mu sync.Mutex
	var sunk []string
	s.OnItem(func(ctx context.Context, it *slaved.Item) error {
		mu.Lock()
		defer mu.Unlock()
		sunk = append(sunk, fmt.Sprintf("%s %v", it.Fields["name"], it.Fields["price"]))
		return nil
	})

	res, err := s.FetchOne(context.Background(), site.URL+"/products.txt")
	if err != nil {
		panic(err)
	}
	fmt.Println("sunk:", sunk)
	fmt.Println("stored:", len(res.Items))
	for _, e := range res.Exceptions {
		fmt.Println("exception:", e.Kind, e.Message)
	}
	// Output:
	// sunk: [Kettle 12.5]
	// stored: 1
	// exception: item_pipeline item product: price of Lamp: strconv.ParseFloat: parsing "n/a": invalid syntax
}

// A hook that panics does not stop the slave: the panic is an exception
// and the task fails.
func ExampleSlave_OnResponse_panic() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<p>hello</p>")
	}))
	defer site.Close()

	s := exampleSlave()
	s.OnResponse(func(ctx context.Context, p *slaved.Page) error {
		var m map[string]int
		m["boom"]++ // a bug
		return nil
	})
	res, err := s.FetchOne(context.Background(), site.URL+"/")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, res.Reason)
	msg := res.Exceptions[0].Message
	fmt.Println(res.Exceptions[0].Kind, msg[:strings.IndexByte(msg, '\n')])
	// Output:
	// fail hook panicked
	// hook OnResponse: panic: assignment to entry in nil map
}

// csvLinks is a content handler: it follows the URLs in the first column
// of a CSV file.
type csvLinks struct{}

func (csvLinks) Name() string { return "csv" }

func (csvLinks) Handle(ctx context.Context, d *slaved.Doc) error {
	body, err := d.Body.Bytes()
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(body), "\n") {
		ref, _, _ := strings.Cut(line, ",")
		if u, err := d.URL.Parse(strings.TrimSpace(ref)); err == nil && ref != "" {
			d.Links = append(d.Links, u)
		}
	}
	if len(d.Links) == 0 {
		return errors.New("no links")
	}
	return nil
}

// Handlers registers a content handler for a media type: here CSV files
// whose first column is a URL to follow.
func ExampleHandlers_Register() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		fmt.Fprint(w, "/a,first\n/b,second\n")
	}))
	defer site.Close()

	s := exampleSlave()
	if err := s.Handlers().Register("text/csv", csvLinks{}); err != nil {
		panic(err)
	}
	res, err := s.FetchOne(context.Background(), site.URL+"/list.csv")
	if err != nil {
		panic(err)
	}
	for _, l := range res.Links {
		fmt.Println(strings.TrimPrefix(l, site.URL))
	}
	// Output:
	// /a
	// /b
}
