package slaved

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRequestBlockDropsCredentials: a WARC request record never holds a
// cookie or credentials, whoever set them on the request.
func TestRequestBlockDropsCredentials(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://a.test/p?q=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	req.Header.Set("Cookie", "sid=secret-cookie")
	req.Header.Set("Authorization", "Basic c2VjcmV0")
	req.Header.Set("Proxy-Authorization", "Basic cHJveHk=")
	got := string(requestBlock(req, "bot/1"))
	want := "GET /p?q=1 HTTP/1.1\r\nHost: a.test\r\nAccept: text/html\r\nUser-Agent: bot/1\r\n\r\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request block (-want +got):\n%s", diff)
	}
	if req.Header.Get("Cookie") == "" || strings.Contains(got, "secret") {
		t.Error("requestBlock changed the request or kept a credential")
	}
}
