package extract

import (
	"bytes"
	"fmt"
	"math"
	"mime"
	"strings"

	"github.com/PuerkitoBio/goquery"
	"github.com/antchfx/htmlquery"
	"github.com/antchfx/xpath"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// docState is one document being extracted: everything parsed from it is
// parsed once, on first use, and shared by all fields.
type docState struct {
	doc    Document
	isJSON bool

	textDone bool
	body     string

	treeDone bool
	root     *html.Node
	gq       *goquery.Document

	jsonDone bool
	jsonRoot any
	jsonErr  error

	blocksDone bool
	blocks     []jsonBlock
}

// jsonBlock is an embedded <script type="application/(ld+)json"> block.
type jsonBlock struct {
	text   string
	parsed bool
	value  any
	err    error
}

func newDocState(doc Document) *docState {
	return &docState{doc: doc, isJSON: isJSONDoc(doc)}
}

// isJSONDoc reports whether the body is JSON: by its media type
// (application/json, anything+json, text/json), else, with no media type,
// by its first non-space byte.
func isJSONDoc(doc Document) bool {
	if doc.ContentType != "" {
		mt, _, err := mime.ParseMediaType(doc.ContentType)
		if err != nil {
			mt = strings.ToLower(strings.TrimSpace(strings.SplitN(doc.ContentType, ";", 2)[0]))
		}
		return mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
	}
	b := bytes.TrimLeft(doc.Body, " \t\r\n\ufeff")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

func (st *docState) text() string {
	if !st.textDone {
		st.body = string(st.doc.Body)
		st.textDone = true
	}
	return st.body
}

// tree parses the HTML once; nil for a JSON document.
func (st *docState) tree() *html.Node {
	if st.treeDone {
		return st.root
	}
	st.treeDone = true
	if st.isJSON {
		return nil
	}
	root, err := html.Parse(bytes.NewReader(st.doc.Body))
	if err != nil { // only a reader error: cannot happen with bytes.Reader
		return nil
	}
	st.root = root
	st.gq = goquery.NewDocumentFromNode(root)
	st.gq.Url = st.doc.URL
	return root
}

// css selects with the goquery document: a match's text is its
// Selection.Text, as colly's HTMLElement.Text (this package uses goquery,
// the engine under colly's HTMLElement, directly: importing colly would
// add about 3 MB to every slave's RSS for its App Engine and protobuf
// dependencies).
func (st *docState) css(cf *compiledField, limit int) []any {
	if st.tree() == nil {
		return nil
	}
	sel := st.gq.FindMatcher(cf.css)
	var out []any
	for i := range sel.Nodes {
		if len(out) >= limit {
			break
		}
		s := sel.Eq(i)
		switch cf.Attr {
		case "":
			out = append(out, strings.TrimSpace(s.Text()))
		case "html":
			h, err := s.Html()
			if err == nil {
				out = append(out, h)
			}
		default:
			if v, ok := s.Attr(cf.Attr); ok {
				out = append(out, strings.TrimSpace(v))
			}
		}
	}
	return out
}

// xpath evaluates the field's expression on the shared tree. A node set
// yields its nodes' text (or Attr); a string, number or boolean result is
// the single value.
func (st *docState) xpath(cf *compiledField, limit int) []any {
	root := st.tree()
	if root == nil {
		return nil
	}
	expr := cf.xpath.Get().(*xpath.Expr)
	defer cf.xpath.Put(expr)
	var out []any
	switch v := expr.Evaluate(htmlquery.CreateXPathNavigator(root)).(type) {
	case *xpath.NodeIterator:
		for len(out) < limit && v.MoveNext() {
			nav, ok := v.Current().(*htmlquery.NodeNavigator)
			if !ok {
				continue
			}
			if nav.NodeType() == xpath.AttributeNode {
				out = append(out, strings.TrimSpace(nav.Value()))
				continue
			}
			n := nav.Current()
			switch cf.Attr {
			case "":
				out = append(out, strings.TrimSpace(htmlquery.InnerText(n)))
			case "html":
				out = append(out, htmlquery.OutputHTML(n, false))
			default:
				if htmlquery.ExistsAttr(n, cf.Attr) {
					out = append(out, strings.TrimSpace(htmlquery.SelectAttr(n, cf.Attr)))
				}
			}
		}
	case string:
		if v != "" {
			out = append(out, v)
		}
	case float64:
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	case bool:
		out = append(out, v)
	}
	return out
}

// json evaluates path on the JSON body, or on the embedded JSON blocks in
// document order until one matches. Blocks that are not valid JSON are
// skipped; an invalid JSON body is an error.
func (st *docState) json(p *Path, limit int) ([]any, error) {
	if st.isJSON {
		if !st.jsonDone {
			st.jsonDone = true
			st.jsonRoot, st.jsonErr = decodeJSON(st.doc.Body)
		}
		if st.jsonErr != nil {
			return nil, st.jsonErr
		}
		return evalLimited(p, st.jsonRoot, limit)
	}
	st.findBlocks()
	for i := range st.blocks {
		b := &st.blocks[i]
		if !b.parsed {
			b.parsed = true
			b.value, b.err = decodeJSON([]byte(b.text))
		}
		if b.err != nil {
			continue
		}
		vals, err := evalLimited(p, b.value, limit)
		if err != nil {
			return nil, err
		}
		if len(vals) > 0 {
			return vals, nil
		}
	}
	return nil, nil
}

func evalLimited(p *Path, root any, limit int) ([]any, error) {
	vals, err := p.Eval(root)
	if err != nil {
		return nil, err
	}
	out := vals[:0:0]
	for _, v := range vals {
		if v == nil {
			continue
		}
		if len(out) >= limit {
			break
		}
		out = append(out, v)
	}
	return out, nil
}

// findBlocks collects the embedded JSON script blocks in document order.
func (st *docState) findBlocks() {
	if st.blocksDone {
		return
	}
	st.blocksDone = true
	root := st.tree()
	if root == nil {
		return
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.DataAtom == atom.Script {
			for _, a := range n.Attr {
				if a.Key != "type" {
					continue
				}
				t := strings.ToLower(strings.TrimSpace(a.Val))
				if t == "application/ld+json" || t == "application/json" {
					var b strings.Builder
					for c := n.FirstChild; c != nil; c = c.NextSibling {
						if c.Type == html.TextNode {
							b.WriteString(c.Data)
						}
					}
					st.blocks = append(st.blocks, jsonBlock{text: b.String()})
				}
			}
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
}

// String describes the document for debugging.
func (d Document) String() string {
	return fmt.Sprintf("%v (%s, %d bytes)", d.URL, d.ContentType, len(d.Body))
}
