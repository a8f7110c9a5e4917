package workapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
)

// completeBody is a completion request as a slave of make bench sends
// one: n pages, each with 8 links and a page event of ~500 bytes, and a
// claim.
func completeBody(n int) CompleteRequest {
	var r CompleteRequest
	for i := range n {
		u := fmt.Sprintf("http://h%02d.bench.test/page/%d", i%20, i*37)
		c := Completion{Lease: LeaseRef{URL: u, Token: int64(1000 + i)}, Outcome: OutcomeDone, ContentHash: "1e1317a5bac7e063"}
		for k := range 8 {
			c.Links = append(c.Links, Link{URL: fmt.Sprintf("http://h%02d.bench.test/page/%d", (i+k)%20, i*7+k*131), Depth: 2})
		}
		ev := fmt.Sprintf(`{"crawl":"bench","url":%q,"final_url":%q,"status":200,"content_type":"text/html; charset=utf-8","bytes":15003,"depth":1,"fetched_at":1795403045380,"slave":"bench-s1","content_hash":"1f092cb6a1c5abf3be4b41362a91211374eb9a0c","duration_ms":7,"attempt":0,"links":8,"charset":"utf-8","proxy":"direct","handler":"html","checksum":"1e1317a5bac7e063"}`, u, u)
		c.Events = []Event{{Type: "page", Data: json.RawMessage(ev)}}
		r.Completions = append(r.Completions, c)
	}
	r.Claim = &ClaimRequest{Max: n}
	return r
}

// benchBounds are the master's bounds (master/workapi's Server.bounds
// with its default of 50,000 links).
var benchBounds = Bounds{Completions: 1000, Links: 50000, LinksTotal: 200000, Events: 100000, Leases: 10000}

// BenchmarkCodec times the master's decoding of a 20-page completion
// (Decode; DecodeBounded, which the master uses, and its generic path)
// against encoding/json's, and the slave's encoding of it (AppendJSON)
// against encoding/json's.
//
//	go test -run '^$' -bench Codec -benchmem ./shared/workapi/
func BenchmarkCodec(b *testing.B) {
	req := completeBody(20)
	body, err := json.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	for _, dc := range []struct {
		name   string
		decode func(r io.Reader, v *CompleteRequest) error
	}{
		{"decode", func(r io.Reader, v *CompleteRequest) error { return Decode(r, 1<<20, v) }},
		{"decode-bounded", func(r io.Reader, v *CompleteRequest) error { return DecodeBounded(r, 1<<20, v, benchBounds) }},
		{"decode-bounded-generic", func(r io.Reader, v *CompleteRequest) error {
			return decodeBoundedGeneric(r, 1<<20, v, benchBounds)
		}},
		{"decode-encoding-json", func(r io.Reader, v *CompleteRequest) error { return json.NewDecoder(r).Decode(v) }},
	} {
		b.Run(dc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for range b.N {
				var r CompleteRequest
				if err := dc.decode(bytes.NewReader(body), &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("encode-append", func(b *testing.B) {
		var buf []byte
		for range b.N {
			buf = req.AppendJSON(buf[:0])
		}
	})
	b.Run("encode-encoding-json", func(b *testing.B) {
		for range b.N {
			if _, err := json.Marshal(req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
