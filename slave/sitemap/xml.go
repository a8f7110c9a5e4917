package sitemap

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/net/html/charset"
)

// runLimit fails a read once more than maxRun bytes came without a '<'
// or '>'.
type runLimit struct {
	r   io.Reader
	run int
}

func (l *runLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, c := range p[:n] {
		if c == '<' || c == '>' {
			l.run = 0
		} else if l.run++; l.run > maxRun {
			return 0, fmt.Errorf("%w: more than %d bytes of text or markup without a tag", ErrTooLarge, maxRun)
		}
	}
	return n, err
}

func parse(in *input, lim Limits) (*Result, error) {
	if isText(in.br) {
		return parseText(in.br, lim)
	}
	return parseXML(newDecoder(in.br), lim)
}

func newDecoder(r io.Reader) *xml.Decoder {
	d := xml.NewDecoder(&runLimit{r: r})
	d.Strict = true
	// The protocol says UTF-8; a file that declares another encoding is
	// decoded from it (x/net/html/charset knows the WHATWG labels).
	d.CharsetReader = charset.NewReaderLabel
	return d
}

// grammar says where a format keeps its entries.
type grammar struct {
	format Format
	entry  string // local name of an entry element
	depth  int    // depth of the entry elements; the root is 1
	// recover reads a damaged urlset or index as crawler-commons does:
	// a further <loc> in an entry starts an entry of its own, and an
	// entry without <loc> whose text is a URL is that URL.
	recover bool
}

// grammarOf returns the grammar of a root element's local name; ok is
// false when it is not a sitemap's.
func grammarOf(root string) (g grammar, ok bool) {
	switch root {
	case "urlset":
		return grammar{format: URLSet, entry: "url", depth: 2, recover: true}, true
	case "sitemapindex":
		return grammar{format: Index, entry: "sitemap", depth: 2, recover: true}, true
	case "rss": // RSS 0.9x and 2.0: rss/channel/item
		return grammar{format: RSS, entry: "item", depth: 3}, true
	case "RDF": // RSS 0.90 and 1.0: rdf:RDF/item
		return grammar{format: RSS, entry: "item", depth: 2}, true
	case "feed": // Atom: feed/entry
		return grammar{format: Atom, entry: "entry", depth: 2}, true
	}
	return grammar{}, false
}

// A field is what the text of an entry's child element gives the entry.
type field uint8

const (
	noField        field = iota
	fieldLoc             // the URL
	fieldAltLoc          // the URL when there is no fieldLoc (RSS <guid>)
	fieldLastMod         // a W3C datetime
	fieldPubDate         // an RFC 822 date (RSS <pubDate>)
	fieldPublished       // lastmod when there is none (Atom <published>)
	fieldChangeFreq
	fieldPriority
)

// field returns the field of an entry's child element, by local name.
// Atom's <link> carries its URL in attributes (entryStart).
func (g grammar) field(local string) field {
	switch g.format {
	case URLSet, Index:
		switch local {
		case "loc":
			return fieldLoc
		case "lastmod":
			return fieldLastMod
		case "changefreq":
			return fieldChangeFreq
		case "priority":
			return fieldPriority
		}
	case RSS:
		switch local {
		case "link":
			return fieldLoc
		case "guid":
			return fieldAltLoc
		case "pubDate":
			return fieldPubDate
		case "date": // dc:date, RSS 1.0's
			return fieldLastMod
		}
	case Atom:
		switch local {
		case "updated":
			return fieldLastMod
		case "published":
			return fieldPublished
		}
	}
	return noField
}

// root reads up to the root element.
func root(d *xml.Decoder) (grammar, error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return grammar{}, fmt.Errorf("sitemap xml: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if g, ok := grammarOf(se.Name.Local); ok {
				return g, nil
			}
			return grammar{}, fmt.Errorf("%w: root element <%s>", ErrNotSitemap, se.Name.Local)
		}
	}
}

// entryReader reads one entry after the other, in the token loop of
// parseXML.
type entryReader struct {
	g   grammar
	res *Result
	lim Limits

	in      bool      // inside an entry
	cur     rawEntry  // the entry being read
	alt     string    // its fieldAltLoc
	pub     time.Time // its fieldPublished
	haveLoc bool      // cur has its URL: a fieldLoc element ended (or an Atom link)
	bare    []byte    // text directly inside the entry element (recover)
	long    bool      // bare went over maxField

	field field  // the field whose text is being read
	text  []byte // its text
	over  bool   // the text went over maxField
}

func parseXML(d *xml.Decoder, lim Limits) (*Result, error) {
	res := &Result{}
	g, err := root(d)
	res.Format = g.format
	if err != nil {
		return res, err
	}
	r := &entryReader{g: g, res: res, lim: lim}
	depth := 1
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return res, r.cut(fmt.Errorf("sitemap xml: %w", err))
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth++; depth > maxNesting {
				return res, r.cut(fmt.Errorf("sitemap xml: elements nested deeper than %d", maxNesting))
			}
			switch {
			case depth == g.depth && t.Name.Local == g.entry:
				r.start(t)
			case r.in && depth == g.depth+1:
				r.child(t)
			}
		case xml.CharData:
			r.chars(t, depth)
		case xml.EndElement:
			var err error
			switch {
			case r.field != noField && depth == g.depth+1:
				err = r.endField()
			case r.in && depth == g.depth:
				err = r.end()
			}
			if err != nil {
				return res, err
			}
			depth--
		}
	}
}

// start begins an entry.
func (r *entryReader) start(t xml.StartElement) {
	*r = entryReader{g: r.g, res: r.res, lim: r.lim, in: true, bare: r.bare[:0], text: r.text[:0]}
	if r.g.format == RSS {
		r.alt = attr(t, "about") // rdf:about of an RSS 1.0 item
	}
}

// child begins a child element of the entry.
func (r *entryReader) child(t xml.StartElement) {
	if r.g.format == Atom && t.Name.Local == "link" {
		// the entry's page: the first link that is its alternate
		if rel, href := attr(t, "rel"), attr(t, "href"); !r.haveLoc && href != "" && (rel == "" || rel == "alternate") {
			r.cur.loc, r.haveLoc = href, true
		}
		return
	}
	r.field, r.text, r.over = r.g.field(t.Name.Local), r.text[:0], false
}

// attr returns the trimmed value of the attribute of t with local name
// local, "" when there is none.
func attr(t xml.StartElement, local string) string {
	for _, a := range t.Attr {
		if a.Name.Local == local {
			return strings.TrimSpace(a.Value)
		}
	}
	return ""
}

// chars collects the text of a field, or the bare text of an entry.
func (r *entryReader) chars(t xml.CharData, depth int) {
	switch {
	case r.field != noField:
		if len(r.text)+len(t) > maxField {
			r.over = true
		} else {
			r.text = append(r.text, t...)
		}
	case r.in && r.g.recover && depth == r.g.depth:
		if len(r.bare)+len(t) > maxField {
			r.long = true
		} else {
			r.bare = append(r.bare, t...)
		}
	}
}

// endField ends a field's element: its text goes to the entry. In a
// urlset or index a second <loc> ends the entry read so far and starts
// another one.
func (r *entryReader) endField() error {
	f := r.field
	r.field = noField
	v := strings.TrimSpace(string(r.text))
	if r.over {
		v = ""
	}
	switch f {
	case fieldLoc:
		if !r.g.recover {
			// a feed: the first link that has a URL is the page
			if !r.haveLoc && (v != "" || r.over) {
				r.cur.loc, r.cur.locTooLong, r.haveLoc = v, r.over, true
			}
			return nil
		}
		if r.haveLoc {
			r.res.Repairs.ExtraLocs++
			if err := r.res.add(r.cur, r.lim); err != nil {
				return err
			}
			r.cur = rawEntry{}
		}
		r.cur.loc, r.cur.locTooLong, r.haveLoc = v, r.over, true
	case fieldAltLoc:
		r.alt = v
	case fieldLastMod:
		r.cur.lastmod = ParseLastMod(v)
	case fieldPubDate:
		r.cur.lastmod = parsePubDate(v)
	case fieldPublished:
		r.pub = ParseLastMod(v)
	case fieldChangeFreq:
		r.cur.changefreq = v
	case fieldPriority:
		r.cur.priority = v
	}
	return nil
}

// end ends an entry and adds it.
func (r *entryReader) end() error {
	r.in = false
	if !r.haveLoc {
		switch bare := strings.TrimSpace(string(r.bare)); {
		case r.alt != "":
			r.cur.loc = r.alt
		case r.g.recover && (bare != "" || r.long):
			r.cur.loc, r.cur.locTooLong = bare, r.long
			r.res.Repairs.BareLocs++
		}
	}
	if r.cur.lastmod.IsZero() {
		r.cur.lastmod = r.pub
	}
	return r.res.add(r.cur, r.lim)
}

// cut ends a file that stopped with err inside an entry: the entry is
// kept when its URL was complete. It returns err.
func (r *entryReader) cut(err error) error {
	if r.in && (r.haveLoc && r.cur.loc != "" || r.alt != "") {
		r.res.Repairs.Truncated++
		r.field = noField
		_ = r.end() // at the limit the entry is not added: err says why
	}
	return err
}
