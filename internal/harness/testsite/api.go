package testsite

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Facts of the JSON API (Options.JSONAPI), served on host 0 under /api/.
//
//	POST /api/login            form user=APIUser&password=APIPassword:
//	                           200 {"token": APIToken}; 403 otherwise
//	GET  /api/products?page=N  N in 1..APIPages, with the header
//	                           "Authorization: Bearer " + APIToken:
//	                           200 {"page":N,"products":[...],"next":"..."}
//	                           ("next" is a relative URL, absent on the last
//	                           page); 401 without the token; 404 for another N
//
// A product is {"id":1,"name":"  Kettle 1 \t","price":"$1,234.50"}: names
// padded with white space and prices as text, for a crawler to clean.
const (
	APIUser     = "crawler"
	APIPassword = "open sesame"
	APIToken    = "tok-6f1d2a"
	APIPages    = 3
	APIPageSize = 4
	// APIProducts is the number of products, APIPages×APIPageSize.
	APIProducts = APIPages * APIPageSize
)

const apiPrefix = "/api/"

// APIInfo describes the JSON API of a site started with Options.JSONAPI.
type APIInfo struct {
	Login    string // URL of the login endpoint (POST)
	Start    string // URL of the first page of products, the crawl's seed
	Pages    []string
	Products []APIProduct // in id order
}

// APIProduct is a product as a crawler should store it, cleaned.
type APIProduct struct {
	ID         int
	URL        string // root + "/api/products/<id>", the product's key
	Name       string // trimmed
	PriceCents int64
	RawName    string // as served
	RawPrice   string // as served, e.g. "$1,234.50"
}

var apiNames = []string{"Kettle", "Toaster", "Lamp", "Radio", "Clock", "Fan"}

// jsonAPIProduct is product id (1-based).
func jsonAPIProduct(root string, id int) APIProduct {
	name := apiNames[(id-1)%len(apiNames)] + " " + strconv.Itoa(id)
	cents := int64(250 + id*12345)
	whole := strconv.FormatInt(cents/100, 10)
	if len(whole) > 3 {
		whole = whole[:len(whole)-3] + "," + whole[len(whole)-3:]
	}
	return APIProduct{ID: id, URL: root + "/api/products/" + strconv.Itoa(id), Name: name, PriceCents: cents,
		RawName: "  " + name + " \t", RawPrice: fmt.Sprintf("$%s.%02d", whole, cents%100)}
}

// API describes the JSON API; it is empty without Options.JSONAPI.
func (s *Site) API() APIInfo {
	if !s.opts.JSONAPI {
		return APIInfo{}
	}
	root := s.hosts[0].root
	info := APIInfo{Login: root + "/api/login", Start: root + "/api/products?page=1"}
	for p := 1; p <= APIPages; p++ {
		info.Pages = append(info.Pages, root+"/api/products?page="+strconv.Itoa(p))
	}
	for id := 1; id <= APIProducts; id++ {
		info.Products = append(info.Products, jsonAPIProduct(root, id))
	}
	return info
}

// apiAnswer is the status and JSON body of an API request.
func (s *Site) apiAnswer(r *http.Request) (int, any) {
	type msg struct {
		Error string `json:"error"`
	}
	switch r.URL.Path {
	case "/api/login":
		if r.Method != http.MethodPost {
			return http.StatusMethodNotAllowed, msg{"POST your user and password"}
		}
		if err := r.ParseForm(); err != nil {
			return http.StatusBadRequest, msg{err.Error()}
		}
		if r.PostForm.Get("user") != APIUser || r.PostForm.Get("password") != APIPassword {
			return http.StatusForbidden, msg{"wrong user or password"}
		}
		return http.StatusOK, map[string]string{"token": APIToken}
	case "/api/products":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return http.StatusMethodNotAllowed, msg{"GET only"}
		}
		if r.Header.Get("Authorization") != "Bearer "+APIToken {
			return http.StatusUnauthorized, msg{"log in first"}
		}
		page, ok := parseIndex(r.URL.Query().Get("page"))
		if !ok || page < 1 || page > APIPages {
			return http.StatusNotFound, msg{"no such page"}
		}
		type product struct {
			ID    int    `json:"id"`
			Name  string `json:"name"`
			Price string `json:"price"`
		}
		out := struct {
			Page     int       `json:"page"`
			Products []product `json:"products"`
			Next     string    `json:"next,omitempty"`
		}{Page: page}
		for id := (page-1)*APIPageSize + 1; id <= page*APIPageSize; id++ {
			p := jsonAPIProduct("", id)
			out.Products = append(out.Products, product{ID: id, Name: p.RawName, Price: p.RawPrice})
		}
		if page < APIPages {
			out.Next = "/api/products?page=" + strconv.Itoa(page+1)
		}
		return http.StatusOK, out
	}
	return http.StatusNotFound, msg{"no such endpoint"}
}

// serveAPI answers a request under /api/ on host 0 and records its hit.
func (s *Site) serveAPI(w http.ResponseWriter, r *http.Request, addr string) {
	status, v := s.apiAnswer(r)
	path := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		path += "?" + r.URL.RawQuery
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	s.inflight.Add(1)
	defer s.inflight.Done()
	s.hits = append(s.hits, Hit{Host: addr, Path: path, At: time.Now(),
		UserAgent: r.UserAgent(), Status: status, Via: r.Header.Get(ProxyHeader), Header: r.Header.Clone()})
	s.mu.Unlock()
	body, err := json.Marshal(v)
	if err != nil {
		panic(err) // fixed shapes: cannot fail
	}
	s.write(w, r, status, "application/json", append(body, '\n'))
}

// isAPI reports whether a request is for the JSON API.
func (s *Site) isAPI(host int, path string) bool {
	return host == 0 && s.opts.JSONAPI && strings.HasPrefix(path, apiPrefix)
}
