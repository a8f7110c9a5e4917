package content

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// page15KB is a 15 KB HTML page: the fixture's body repeated, declared by
// meta (or not).
func page15KB(b *testing.B, meta string) string {
	b.Helper()
	tmpl, err := os.ReadFile(filepath.Join("testdata", "charset", "zh-hans.html"))
	if err != nil {
		b.Fatalf("read fixture: %v", err)
	}
	head, body, _ := strings.Cut(strings.Replace(string(tmpl), "<!--META-->", meta, 1), "<body>")
	var sb strings.Builder
	sb.WriteString(head + "<body>")
	for sb.Len() < 15<<10 {
		sb.WriteString(body)
	}
	return sb.String()
}

func BenchmarkReadBody15KB(b *testing.B) {
	page := []byte(page15KB(b, `<meta charset="utf-8">`))[:15<<10]
	for _, bc := range []struct {
		name string
		hint int64
	}{{"no-length", 0}, {"content-length", int64(len(page))}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				body, err := ReadBody(bytes.NewReader(page), BodyOptions{SizeHint: bc.hint})
				if err != nil {
					b.Fatal(err)
				}
				body.Close()
			}
		})
	}
}

func BenchmarkDecodeHTML(b *testing.B) {
	gbk := func(s string) []byte {
		p, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(s))
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, contentType string
		doc               []byte
	}{
		{"utf-8/header", "text/html; charset=utf-8", []byte(page15KB(b, ""))},
		{"utf-8/meta", "text/html", []byte(page15KB(b, `<meta charset="utf-8">`))},
		{"gbk/header", "text/html; charset=gbk", gbk(page15KB(b, ""))},
		{"gbk/meta", "text/html", gbk(page15KB(b, `<meta charset="gb2312">`))},
		{"gbk/sniffed", "text/html", gbk(page15KB(b, ""))},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			body, err := ReadBody(bytes.NewReader(c.doc), BodyOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer body.Close()
			b.SetBytes(body.Size())
			b.ReportAllocs()
			for b.Loop() {
				r, _, err := DecodeHTML(body, c.contentType)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
