package urlx

import (
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
)

// queryEncoder encodes the characters of a link's query in the encoding of
// the document the link is in, as browsers do: the WHATWG URL parser
// percent-encodes the query "after encoding" it with the document's
// encoding, while the path is always UTF-8. A link to "?c=€" on an
// ISO-8859-15 page is requested as "?c=%A4", on a Shift_JIS page "?q=日本"
// as "?q=%93%FA%96%7B"; a character the encoding lacks becomes its HTML
// numeric character reference, percent-encoded ("♥" on a windows-1252 page:
// "%26%239829%3B"). A nil *queryEncoder leaves the query UTF-8.
type queryEncoder struct {
	enc *encoding.Encoder // unsupported characters as &#NNNN;
}

// newQueryEncoder returns the query encoder of the document encoding named
// (a WHATWG name or label, as content.Encoding.Name gives it); nil for
// UTF-8, for UTF-16 and replacement (WHATWG: their documents' queries are
// UTF-8), and for a name it does not know.
func newQueryEncoder(name string) *queryEncoder {
	if name == "" {
		return nil
	}
	enc, err := htmlindex.Get(name)
	if err != nil {
		return nil
	}
	switch canonical, _ := htmlindex.Name(enc); canonical {
	case "utf-8", "utf-16be", "utf-16le", "replacement":
		return nil
	}
	return &queryEncoder{enc: encoding.HTMLEscapeUnsupported(enc.NewEncoder())}
}

// encode returns the query q (text, not yet percent-encoded) with each run
// of non-ASCII characters encoded and percent-encoded. Escapes already in q
// are left alone, as are bytes that are not valid UTF-8 (they are
// percent-encoded as they are, like any other byte of a query).
func (qe *queryEncoder) encode(q string) string {
	if qe == nil {
		return q
	}
	i := 0
	for i < len(q) && q[i] < utf8.RuneSelf {
		i++
	}
	if i == len(q) {
		return q
	}
	out := make([]byte, 0, len(q)*3)
	out = append(out, q[:i]...)
	for i < len(q) {
		if q[i] < utf8.RuneSelf {
			out = append(out, q[i])
			i++
			continue
		}
		// the run of valid non-ASCII characters from i
		j := i
		for j < len(q) && q[j] >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(q[j:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			j += size
		}
		if j == i { // an invalid byte
			out = append(out, q[i])
			i++
			continue
		}
		out = qe.appendRun(out, q[i:j])
		i = j
	}
	return string(out)
}

// appendRun appends the encoding of run (valid UTF-8, no ASCII),
// percent-encoded. Bytes of the encoding in the ASCII range (Shift_JIS,
// Big5 and GBK second bytes such as 'A' or '\', ISO-2022-JP's whole
// output, the "&#NNNN;" of a character the encoding lacks) stay raw where
// the query may hold them raw, as WHATWG leaves them; the delimiters
// & = + ; % are encoded, so that an encoded character never splits or
// joins parameters (WHATWG leaves them raw too, which only ISO-2022-JP can
// produce).
func (qe *queryEncoder) appendRun(out []byte, run string) []byte {
	enc, err := qe.enc.String(run)
	if err != nil {
		// not expected: unsupported characters are escaped; keep UTF-8
		enc = run
	}
	for k := 0; k < len(enc); k++ {
		b := enc[k]
		switch b {
		case '&', '=', '+', ';', '%':
		default:
			if queryKeep[b] {
				out = append(out, b)
				continue
			}
		}
		out = append(out, '%', upperHex[b>>4], upperHex[b&15])
	}
	return out
}
