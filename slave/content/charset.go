package content

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/transform"
)

// SniffLen is how many leading bytes of a body DecodeHTML gives DetectHTML
// for the <meta> prescan and the sniffing step.
const SniffLen = 16 << 10

// Sources of an encoding decision, in the order they are consulted.
const (
	SourceBOM     = "bom"     // a byte order mark
	SourceHeader  = "header"  // the charset of the HTTP Content-Type
	SourceMeta    = "meta"    // a <meta> declaration in the prefix
	SourceSniff   = "sniff"   // guessed from the bytes: UTF-8 or an East Asian encoding
	SourceDefault = "default" // nothing told: windows-1252
)

// Encoding is the character encoding a document was decoded from.
type Encoding struct {
	// Name is the WHATWG name of the encoding, as charset.Lookup gives it:
	// "utf-8", "windows-1252", "gbk", "gb18030", "big5", "shift_jis",
	// "euc-jp", "euc-kr", "utf-16le", ...
	Name string
	// Source is what decided it: SourceBOM, SourceHeader, SourceMeta,
	// SourceSniff or SourceDefault.
	Source string
}

// DetectHTML decides the encoding of an HTML document from its first bytes
// and the HTTP Content-Type header ("" when there is none): a byte order
// mark, then the header's charset, then a <meta> declaration in prefix,
// then sniffing over prefix, then windows-1252 (see the package
// documentation). It returns the encoding's
// WHATWG name and the source that decided it (SourceBOM, ...).
func DetectHTML(prefix []byte, contentType string) (name string, source string) {
	if name, n := bomEncoding(prefix); n > 0 {
		return name, SourceBOM
	}
	if label := headerCharset(contentType); label != "" {
		if _, name := charset.Lookup(label); name != "" {
			return name, SourceHeader
		}
	}
	if name := prescanMeta(prefix); name != "" {
		return name, SourceMeta
	}
	if name := sniff(prefix); name != "" {
		return name, SourceSniff
	}
	return "windows-1252", SourceDefault
}

// DecodeHTML returns a reader of body b as UTF-8, and the encoding it was
// decoded from, decided by DetectHTML over the first SniffLen bytes.
// A byte order mark is skipped; bytes invalid in the encoding become
// U+FFFD, so the reader yields valid UTF-8. Each call reads b from the start.
func DecodeHTML(b *Body, contentType string) (io.Reader, Encoding, error) {
	enc := DetectBody(b, contentType)
	r, err := DecodeHTMLAs(b, enc)
	if err != nil {
		return nil, Encoding{}, err
	}
	return r, enc, nil
}

// DecodeHTMLAs is DecodeHTML with the encoding decided already (DetectBody),
// so that a caller that looked at it first does not detect it twice.
func DecodeHTMLAs(b *Body, enc Encoding) (io.Reader, error) {
	if b == nil {
		return nil, errors.New("decode html: nil body")
	}
	if b.closed.Load() && b.file != nil {
		return nil, errors.New("decode html: body is closed")
	}
	var r io.Reader = b.NewReader()
	if enc.Source == SourceBOM {
		_, n := bomEncoding(b.Prefix(SniffLen))
		r = io.NewSectionReader(b.NewReader(), int64(n), b.Size()-int64(n))
	}
	if enc.Name == "gbk" {
		// WHATWG: "GBK's decoder is gb18030's decoder"; x/text's GBK
		// decoder rejects GB18030's four-byte sequences.
		return transform.NewReader(r, simplifiedchinese.GB18030.NewDecoder()), nil
	}
	dr, err := charset.NewReaderLabel(enc.Name, r)
	if err != nil {
		return nil, fmt.Errorf("decode html as %s: %w", enc.Name, err)
	}
	return dr, nil
}

// DetectBody decides the encoding of body b as DecodeHTML does, DetectHTML
// over its first SniffLen bytes, without making a decoder: a caller that
// takes a UTF-8 body's bytes as they are (a page's link extraction) need
// not pay for a reader it does not use (two 4 KiB buffers a page).
func DetectBody(b *Body, contentType string) Encoding {
	if b == nil {
		return Encoding{}
	}
	name, source := DetectHTML(b.Prefix(SniffLen), contentType)
	return Encoding{Name: name, Source: source}
}

// boms are the byte order marks, as DetermineEncoding checks them.
var boms = [...]struct {
	bom  string
	name string
}{
	{"\xef\xbb\xbf", "utf-8"},
	{"\xfe\xff", "utf-16be"},
	{"\xff\xfe", "utf-16le"},
}

// bomEncoding returns the encoding of the byte order mark p starts with and
// the mark's length; 0 when there is none.
func bomEncoding(p []byte) (string, int) {
	for _, b := range boms {
		if bytes.HasPrefix(p, []byte(b.bom)) {
			return b.name, len(b.bom)
		}
	}
	return "", 0
}

// headerCharset returns the charset parameter of a Content-Type value, ""
// when there is none. A value mime.ParseMediaType rejects (servers send
// "text/html; charset=gbk;" or "text/html;charset=utf-8 ;x") is searched for
// "charset=" by hand, as browsers do.
func headerCharset(contentType string) string {
	if contentType == "" {
		return ""
	}
	if _, params, err := mime.ParseMediaType(contentType); err == nil {
		return params["charset"]
	}
	lower := strings.ToLower(contentType)
	i := strings.Index(lower, "charset")
	if i < 0 {
		return ""
	}
	s := strings.TrimLeft(contentType[i+len("charset"):], " \t")
	if !strings.HasPrefix(s, "=") {
		return ""
	}
	s = strings.TrimLeft(s[1:], " \t")
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		q := s[0]
		s = s[1:]
		if j := strings.IndexByte(s, q); j >= 0 {
			return s[:j]
		}
		return ""
	}
	if j := strings.IndexAny(s, "; \t,"); j >= 0 {
		s = s[:j]
	}
	return s
}

// prescanMeta returns the WHATWG name of the encoding the first <meta>
// element of p that declares one names, "" when none does; it reads all of
// p. It is the prescan of golang.org/x/net/html/charset (unexported there;
// DetermineEncoding calls it after the BOM and header checks), restated
// here to know whether it or the sniffing step decided, and to read past
// 1024 bytes; a test checks that it agrees with DetermineEncoding over the
// first 1024 bytes of every conformance case. Like it, and unlike the WHATWG prescan, it tokenizes with
// the x/net/html tokenizer. One WHATWG rule x/net lacks is added: a
// declared x-user-defined means windows-1252.
func prescanMeta(p []byte) string {
	z := html.NewTokenizer(bytes.NewReader(p))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			tag, hasAttr := z.TagName()
			if string(tag) != "meta" {
				continue
			}
			if name := metaCharset(z, hasAttr); name != "" {
				return name
			}
		}
	}
}

// metaCharset returns the encoding a <meta> tag declares, "" when none.
func metaCharset(z *html.Tokenizer, hasAttr bool) string {
	const (
		dontKnow = iota
		doNeedPragma
		doNotNeedPragma
	)
	seen := make(map[string]bool, 4)
	gotPragma, needPragma := false, dontKnow
	name, found := "", false
	for hasAttr {
		var key, val []byte
		key, val, hasAttr = z.TagAttr()
		k := string(key)
		if seen[k] {
			continue
		}
		seen[k] = true
		v := strings.ToLower(string(val))
		switch k {
		case "http-equiv":
			if v == "content-type" {
				gotPragma = true
			}
		case "content":
			if !found {
				if label := charsetFromContent(v); label != "" {
					if _, n := charset.Lookup(label); n != "" {
						name, found, needPragma = n, true, doNeedPragma
					}
				}
			}
		case "charset":
			_, name = charset.Lookup(v)
			found, needPragma = name != "", doNotNeedPragma
		}
	}
	if needPragma == dontKnow || needPragma == doNeedPragma && !gotPragma || !found {
		return ""
	}
	switch {
	case strings.HasPrefix(name, "utf-16"):
		return "utf-8"
	case name == "x-user-defined":
		return "windows-1252"
	}
	return name
}

// charsetFromContent is the WHATWG "algorithm for extracting a character
// encoding from a meta element" over a content attribute's value.
func charsetFromContent(s string) string {
	for s != "" {
		i := strings.Index(s, "charset")
		if i < 0 {
			return ""
		}
		s = strings.TrimLeft(s[i+len("charset"):], " \t\n\f\r")
		if !strings.HasPrefix(s, "=") {
			continue
		}
		s = strings.TrimLeft(s[1:], " \t\n\f\r")
		if s == "" {
			return ""
		}
		if q := s[0]; q == '"' || q == '\'' {
			s = s[1:]
			j := strings.IndexByte(s, q)
			if j < 0 {
				return ""
			}
			return s[:j]
		}
		if j := strings.IndexAny(s, "; \t\n\f\r"); j >= 0 {
			return s[:j]
		}
		return s
	}
	return ""
}

// sniff guesses the encoding of an undeclared document: "utf-8" when p has
// non-ASCII bytes and is valid UTF-8 (a rune cut at the end aside), else an
// East Asian encoding when sniffCJK finds one, else "".
func sniff(p []byte) string {
	i := 0
	for i < len(p) && p[i] < utf8.RuneSelf {
		i++
	}
	if i == len(p) {
		return "" // ASCII only
	}
	// Drop a rune cut at the end of the prefix.
	q := p
	for j := len(q) - 1; j >= 0 && j > len(q)-utf8.UTFMax; j-- {
		if q[j] < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(q[j]) {
			if !utf8.FullRune(q[j:]) {
				q = q[:j]
			}
			break
		}
	}
	if utf8.Valid(q[i:]) {
		return "utf-8"
	}
	// The first few KiB of text are plenty to tell the encodings apart.
	return sniffCJK(p[i:min(len(p), i+cjkSniffLen)])
}

// cjkSniffLen is how many bytes sniffCJK reads, from the first non-ASCII.
const cjkSniffLen = 4 << 10
