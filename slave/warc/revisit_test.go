package warc

import (
	"crypto/sha1"
	"encoding/base32"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRevisitRecords writes the two revisit profiles and reads them back
// with the test's independent reader: the block is the response header
// alone, the payload digest is the unstored body's (identical payload) or
// absent (not modified), and the profile and referred-to capture are named.
func TestRevisitRecords(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, 0)
	body := "<html>the same body as last time</html>"
	sum := sha1.Sum([]byte(body))
	bodyDigest := "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
	notMod := "HTTP/1.1 304 Not Modified\r\nEtag: \"e1\"\r\n\r\n"
	same := "HTTP/1.1 200 OK\r\nContent-Length: 39\r\n\r\n"
	hdrDigest := func(h string) string {
		s := sha1.Sum([]byte(h))
		return "sha1:" + base32.StdEncoding.EncodeToString(s[:])
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		x    Exchange
		want map[string]string
	}{
		{Exchange{TargetURI: "http://a.test/1", ResponseHeader: []byte(notMod), BodySize: 0,
			Profile: ProfileServerNotModified, RefersToURI: "http://a.test/1", RefersToDate: at},
			map[string]string{"WARC-Type": "revisit", "WARC-Profile": ProfileServerNotModified,
				"WARC-Refers-To-Target-URI": "http://a.test/1", "WARC-Refers-To-Date": "2025-01-02T03:04:05Z",
				"WARC-Block-Digest": hdrDigest(notMod), "WARC-Payload-Digest": "",
				"Content-Length": "41", "block": notMod}},
		{Exchange{TargetURI: "http://a.test/2", ResponseHeader: []byte(same), Body: strings.NewReader(body),
			BodySize: int64(len(body)), Profile: ProfileIdenticalPayloadDigest},
			map[string]string{"WARC-Type": "revisit", "WARC-Profile": ProfileIdenticalPayloadDigest,
				"WARC-Refers-To-Target-URI": "", "WARC-Refers-To-Date": "",
				"WARC-Block-Digest": hdrDigest(same), "WARC-Payload-Digest": bodyDigest,
				"Content-Length": "39", "block": same}},
	}
	var locs []Location
	for _, c := range cases {
		loc, err := w.WriteExchange(c.x)
		if err != nil {
			t.Fatal(err)
		}
		locs = append(locs, loc)
	}
	if _, err := w.WriteExchange(Exchange{TargetURI: "http://a.test/", ResponseHeader: []byte(same), Profile: "nope"}); err == nil || !strings.Contains(err.Error(), "Profile") {
		t.Errorf("unknown profile: %v, want an error", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		r := readAt(t, dir, locs[i])
		got := map[string]string{"block": string(r.block)}
		for k := range c.want {
			if k != "block" {
				got[k] = r.fields[k]
			}
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("case %d (-want +got):\n%s", i, d)
		}
	}
}
