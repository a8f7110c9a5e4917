package testsite

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRevisionsAndValidators checks conditional requests against a site
// with validators and one without, before and after a page is revised.
func TestRevisionsAndValidators(t *testing.T) {
	type answer struct {
		Status int
		Rev    bool // the body carries a revision marker
		ETag   string
	}
	get := func(t *testing.T, u string, hdr map[string]string) answer {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return answer{Status: res.StatusCode, Rev: strings.Contains(string(b), `class="rev"`), ETag: res.Header.Get("ETag")}
	}
	for _, validators := range []bool{true, false} {
		site, err := Start(Options{Hosts: 1, PagesPerHost: 4, Validators: validators})
		if err != nil {
			t.Fatal(err)
		}
		u := site.PageURL(0, 2)
		etag0, etag1 := "", ""
		if validators {
			etag0, etag1 = `"h0-p2-r0"`, `"h0-p2-r1"`
		}
		lm0 := "Mon, 01 Jan 2024 00:00:00 GMT"
		var got []answer
		got = append(got, get(t, u, nil))
		got = append(got, get(t, u, map[string]string{"If-None-Match": `"h0-p2-r0"`}))
		got = append(got, get(t, u, map[string]string{"If-Modified-Since": lm0}))
		if n := site.Revise(u, "http://elsewhere.test/"); n != 1 {
			t.Errorf("Revise = %d, want 1", n)
		}
		got = append(got, get(t, u, map[string]string{"If-None-Match": `"h0-p2-r0"`}))
		got = append(got, get(t, u, map[string]string{"If-Modified-Since": lm0}))
		got = append(got, get(t, u, map[string]string{"If-None-Match": `"h0-p2-r1"`}))
		want := []answer{{200, false, etag0}, {304, false, etag0}, {304, false, etag0},
			{200, true, etag1}, {200, true, etag1}, {304, false, etag1}}
		if !validators {
			want = []answer{{200, false, ""}, {200, false, ""}, {200, false, ""},
				{200, true, ""}, {200, true, ""}, {200, true, ""}}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("validators %v (-want +got):\n%s", validators, d)
		}
		if r := site.Revision(u); r != 1 {
			t.Errorf("Revision = %d, want 1", r)
		}
		var statuses []int
		for _, h := range site.Hits() {
			statuses = append(statuses, h.Status)
		}
		wantSt := []int{200, 304, 304, 200, 200, 304}
		if !validators {
			wantSt = []int{200, 200, 200, 200, 200, 200}
		}
		if d := cmp.Diff(wantSt, statuses); d != "" {
			t.Errorf("validators %v: hit statuses (-want +got):\n%s", validators, d)
		}
		site.Close()
	}
}
