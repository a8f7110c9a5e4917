// Command jsonapi is an example of a slave written in Go: it crawls a
// paginated JSON API that needs a login, with the hooks of package slaved.
//
//	jsonapi run [--config config.yaml] [--id ID] [--out items.jsonl] [--store-items=true]
//
// The API (the test site's, internal/harness/testsite/api.go, is one):
//
//	POST /api/login  form user=…&password=…  →  {"token": "…"}
//	GET  /api/products?page=N  with "Authorization: Bearer <token>"
//	     →  {"products":[{"id":1,"name":"  Kettle 1 ","price":"$1,234.50"}],"next":"/api/products?page=2"}
//
// What it does, hook by hook:
//
//   - OnRequest logs in once per site (a POST with JSONAPI_USER and
//     JSONAPI_PASSWORD from the environment, never from the command line)
//     and signs every request with the token;
//   - OnResponse forgets a refused token and retries the page (the next
//     request logs in again), turns each product into an item keyed by
//     its own URL and follows the "next" link;
//   - OnItem cleans each item (name trimmed, price parsed to cents; an
//     unparsable price drops the item with an item_pipeline exception)
//     and writes it as one JSON line to --out, a stand-in for Kafka or S3.
//
// Items also go to MySQL's items table through the master, unless
// --store-items=false. Seed the crawl with the first page's URL
// (master seed http://host/api/products?page=1). Exit status as the stock
// slave's: 0 ok, 1 runtime error, 2 bad usage or bad config.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redcrawl/redcrawl/shared/config"
	"github.com/redcrawl/redcrawl/slave/slaved"
)

const usage = `usage: jsonapi run [--config config.yaml] [--id ID] [--out items.jsonl] [--store-items=true]
environment: JSONAPI_USER, JSONAPI_PASSWORD (the API's login)
`

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "run" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("jsonapi run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "config file")
	id := fs.String("id", "", "slave id (default host-pid-random)")
	out := fs.String("out", "items.jsonl", "file the items are appended to, one JSON object a line")
	storeItems := fs.Bool("store-items", true, "also store the items in MySQL, through the master")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "jsonapi run: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "jsonapi: %v\n", err)
		return config.ExitCode(err)
	}
	log := cfg.NewLogger(stderr)
	user, password := os.Getenv("JSONAPI_USER"), os.Getenv("JSONAPI_PASSWORD")
	if user == "" {
		fmt.Fprintln(stderr, "jsonapi: JSONAPI_USER is not set")
		return 2
	}
	sink, err := openSink(*out)
	if err != nil {
		fmt.Fprintf(stderr, "jsonapi: %v\n", err)
		return 1
	}
	defer sink.close()

	s, err := slaved.New(cfg, slaved.Options{ID: *id, Logger: log, SkipItemStore: !*storeItems})
	if err != nil {
		fmt.Fprintf(stderr, "jsonapi: %v\n", err)
		return 2
	}
	a := &auth{user: user, password: password, client: &http.Client{Timeout: cfg.Fetch.Timeout},
		tokens: map[string]string{}}
	s.OnRequest(a.sign)
	s.OnResponse(func(ctx context.Context, p *slaved.Page) error { return readPage(a, p) })
	s.OnItem(clean)
	s.OnItem(sink.write)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.Run(ctx); err != nil {
		log.Error("slave failed", "err", err)
		return 1
	}
	return 0
}

// auth logs in once per site and keeps the token. Hooks run in many
// workers at once: the mutex makes the first request of a site log in
// while the others wait for its token.
type auth struct {
	user, password string
	client         *http.Client
	mu             sync.Mutex
	tokens         map[string]string // by origin, scheme://host:port
}

func origin(u *url.URL) string { return u.Scheme + "://" + u.Host }

// sign is the OnRequest hook: it adds the site's token to each request.
func (a *auth) sign(ctx context.Context, r *slaved.Request) error {
	tok, err := a.token(ctx, origin(r.URL))
	if err != nil {
		return err // recorded as a hook exception; the page is retried later
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// token returns the site's token, logging in when there is none.
func (a *auth) token(ctx context.Context, site string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if tok, ok := a.tokens[site]; ok {
		return tok, nil
	}
	form := url.Values{"user": {a.user}, "password": {a.password}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, site+"/api/login", strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("log in to %s: %w", site, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := a.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("log in to %s: %w", site, err)
	}
	defer res.Body.Close()
	var body struct {
		Token string `json:"token"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<16)).Decode(&body); err != nil {
		return "", fmt.Errorf("log in to %s: HTTP %d: %w", site, res.StatusCode, err)
	}
	if res.StatusCode != http.StatusOK || body.Token == "" {
		return "", fmt.Errorf("log in to %s: HTTP %d: %s", site, res.StatusCode, body.Error)
	}
	a.tokens[site] = body.Token
	return body.Token, nil
}

// forget drops a site's token that the site refused.
func (a *auth) forget(site string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.tokens, site)
}

// readPage is the OnResponse hook: a page of products becomes items and
// a link to the next page.
func readPage(a *auth, p *slaved.Page) error {
	if p.Status == http.StatusUnauthorized {
		a.forget(origin(p.URL))
		p.Retry("token refused: logging in again")
		return nil
	}
	if p.Status != http.StatusOK || !strings.HasPrefix(p.Header.Get("Content-Type"), "application/json") {
		return nil // anything else: the slave's own handling
	}
	body, err := p.Body()
	if err != nil {
		return err
	}
	var page struct {
		Products []struct {
			ID    int    `json:"id"`
			Name  string `json:"name"`
			Price string `json:"price"`
		} `json:"products"`
		Next string `json:"next"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		p.Fail("not a page of products: " + err.Error())
		return nil
	}
	for _, pr := range page.Products {
		itemURL := origin(p.URL) + "/api/products/" + strconv.Itoa(pr.ID)
		p.AddItem("product", itemURL, map[string]any{"id": pr.ID, "name": pr.Name, "price": pr.Price})
	}
	if page.Next != "" {
		p.AddLink(page.Next)
	}
	return nil
}

// clean is the first OnItem hook: the name trimmed, the price in cents.
func clean(_ context.Context, it *slaved.Item) error {
	name, _ := it.Fields["name"].(string)
	it.Fields["name"] = strings.TrimSpace(name)
	raw, _ := it.Fields["price"].(string)
	cents, err := parseCents(raw)
	if err != nil {
		return err // the item is dropped, with an item_pipeline exception
	}
	delete(it.Fields, "price")
	it.Fields["price_cents"] = cents
	return nil
}

// parseCents parses a price such as "$1,234.50".
func parseCents(s string) (int64, error) {
	t := strings.ReplaceAll(strings.TrimPrefix(strings.TrimSpace(s), "$"), ",", "")
	whole, frac, _ := strings.Cut(t, ".")
	if len(frac) > 2 {
		return 0, fmt.Errorf("price %q: more than 2 decimals", s)
	}
	frac += strings.Repeat("0", 2-len(frac))
	w, err1 := strconv.ParseInt(whole, 10, 64)
	f, err2 := strconv.ParseInt(frac, 10, 64)
	if err := errors.Join(err1, err2); err != nil || w < 0 || f < 0 {
		return 0, fmt.Errorf("price %q: not a price", s)
	}
	return w*100 + f, nil
}

// sink appends items to a file, one JSON object a line.
type sink struct {
	mu sync.Mutex
	f  *os.File
}

func openSink(path string) (*sink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open item file: %w", err)
	}
	return &sink{f: f}, nil
}

// write is the last OnItem hook: one write per line, to a file opened
// for appending. An error is recorded as an item_pipeline exception.
func (s *sink) write(_ context.Context, it *slaved.Item) error {
	line, err := json.Marshal(map[string]any{"item": it.Name, "url": it.URL, "page": it.PageURL,
		"fields": it.Fields, "at": time.Now().UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return fmt.Errorf("encode item: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write item file: %w", err)
	}
	return nil
}

func (s *sink) close() {
	if err := s.f.Close(); err != nil {
		slog.Error("close item file", "err", err)
	}
}
