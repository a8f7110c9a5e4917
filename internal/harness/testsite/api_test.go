package testsite

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestJSONAPI logs in to the JSON API and walks its pages: every answer
// as documented, the products those of API(), and nothing without the
// option.
func TestJSONAPI(t *testing.T) {
	off := start(t, Options{Hosts: 1, PagesPerHost: 5, Seed: 3})
	if d := cmp.Diff(APIInfo{}, off.API()); d != "" {
		t.Errorf("API() without Options.JSONAPI (-want +got):\n%s", d)
	}
	s := start(t, Options{Hosts: 2, PagesPerHost: 5, Seed: 3, JSONAPI: true})
	api := s.API()
	c := newClient(t)
	do := func(method, u, auth string, form url.Values) (int, []byte) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, u, body)
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, b
	}
	good := url.Values{"user": {APIUser}, "password": {APIPassword}}
	bad := url.Values{"user": {APIUser}, "password": {"guess"}}
	bearer := "Bearer " + APIToken
	host1 := strings.TrimSuffix(s.HostURLs()[1], "/")
	tests := []struct {
		name, method, url, auth string
		form                    url.Values
		status                  int
	}{
		{"login", http.MethodPost, api.Login, "", good, 200},
		{"wrong password", http.MethodPost, api.Login, "", bad, 403},
		{"login by GET", http.MethodGet, api.Login, "", nil, 405},
		{"no token", http.MethodGet, api.Start, "", nil, 401},
		{"wrong token", http.MethodGet, api.Start, "Bearer x", nil, 401},
		{"first page", http.MethodGet, api.Start, bearer, nil, 200},
		{"page 0", http.MethodGet, strings.Replace(api.Start, "page=1", "page=0", 1), bearer, nil, 404},
		{"past the last page", http.MethodGet, strings.Replace(api.Start, "page=1", "page=4", 1), bearer, nil, 404},
		{"other host", http.MethodGet, host1 + "/api/products?page=1", bearer, nil, 404},
	}
	for _, tt := range tests {
		if st, b := do(tt.method, tt.url, tt.auth, tt.form); st != tt.status {
			t.Errorf("%s: status %d, want %d (%s)", tt.name, st, tt.status, b)
		}
	}
	if _, b := do(http.MethodPost, api.Login, "", good); string(b) != `{"token":"`+APIToken+`"}`+"\n" {
		t.Errorf("login answer %s", b)
	}

	// walk the pages by their next links
	var got []APIProduct
	var pages []string
	for next := api.Start; next != ""; {
		pages = append(pages, next)
		st, b := do(http.MethodGet, next, bearer, nil)
		if st != 200 {
			t.Fatalf("%s: status %d", next, st)
		}
		var doc struct {
			Products []struct {
				ID    int
				Name  string
				Price string
			}
			Next string
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", next, err)
		}
		for _, p := range doc.Products {
			want := jsonAPIProduct(strings.TrimSuffix(s.HostURLs()[0], "/"), p.ID)
			got = append(got, APIProduct{ID: p.ID, URL: want.URL, Name: strings.TrimSpace(p.Name),
				PriceCents: want.PriceCents, RawName: p.Name, RawPrice: p.Price})
		}
		if doc.Next == "" {
			break
		}
		u, _ := url.Parse(next)
		nu, _ := u.Parse(doc.Next)
		next = nu.String()
		if len(pages) > APIPages {
			t.Fatal("more pages than APIPages")
		}
	}
	if d := cmp.Diff(api.Pages, pages); d != "" {
		t.Errorf("pages (-want +got):\n%s", d)
	}
	if d := cmp.Diff(api.Products, got); d != "" {
		t.Errorf("products (-want +got):\n%s", d)
	}
	if p := api.Products[APIProducts-1]; p.RawPrice != "$1,483.90" || p.PriceCents != 148390 || p.Name != "Fan 12" {
		t.Errorf("last product %+v", p)
	}
	for _, h := range s.Hits() {
		if h.Path == "/api/products?page=1" && h.Status == 0 {
			t.Errorf("hit without status: %+v", h)
		}
	}
}
