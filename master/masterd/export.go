package masterd

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
)

// ExportOptions select the items to export and how they are written.
type ExportOptions struct {
	Crawl, Rule, Item string
	Format            string // jsonl, json (one array) or csv
	// Fields, when set, writes flat rows of these fields only, without the
	// envelope (crawl, rule, item, url, fetched_at): a JSON object or a CSV
	// row per item, a field missing from an item null or empty. A name
	// of the envelope that no item field has takes the envelope's value
	// (url, say).
	Fields []string
	// Since, when set, exports only the items stored (new, or updated by
	// a fetch again) at or after it: a run's own (master crawl --append).
	Since time.Time
	// cont is what an export appended to a file continues (ExportFile)
	cont continuation
}

// continuation is what a file being appended to holds, which an export
// continues: JSON Lines need nothing; a JSON array its items so far (the
// file cut before its closing bracket); CSV its header, whose columns the
// rows keep.
type continuation struct {
	on         bool     // appending to a file that holds an export
	arrayItems bool     // json: the array holds items
	header     []string // csv: the file's header
}

// ExportFormats are the formats Export writes.
var ExportFormats = []string{"jsonl", "json", "csv"}

// FormatOfPath is the export format of an output file's extension:
// .jsonl or .ndjson JSON Lines, .json one JSON array, .csv CSV; "" when
// the extension names none.
func FormatOfPath(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		return "jsonl"
	case ".json":
		return "json"
	case ".csv":
		return "csv"
	}
	return ""
}

// exportRecord is one JSONL line.
type exportRecord struct {
	Crawl     string          `json:"crawl"`
	Rule      string          `json:"rule"`
	Item      string          `json:"item"`
	URL       string          `json:"url"`
	FetchedAt string          `json:"fetched_at"`
	Data      json.RawMessage `json:"data"`
}

// Export streams the extracted items of a crawl out of MySQL, one JSON
// object a line or as CSV with a column per field, and returns how many it
// wrote. A crawl MySQL holds no rows of is an *UnknownCrawlError
// (opt.Crawl "" = crawl.name). CSV needs its header first, so it reads the items twice: once for
// the field names, once to write; neither pass holds the items in memory.
func Export(ctx context.Context, cfg *config.Config, opt ExportOptions, w io.Writer) (int, error) {
	db, err := openStoreOnce(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if opt.Crawl == "" {
		opt.Crawl = cfg.Crawl.Name
	}
	if err := checkStoreCrawl(ctx, db, opt.Crawl); err != nil {
		return 0, err
	}
	f := store.ItemFilter{Crawl: opt.Crawl, Rule: opt.Rule, Item: opt.Item, Since: opt.Since}
	bw := bufio.NewWriterSize(w, 64<<10)
	n := 0
	switch {
	case len(opt.Fields) > 0 && opt.Format == "csv":
		cw := csv.NewWriter(bw)
		if h := opt.cont.header; h != nil {
			if !slices.Equal(h, opt.Fields) {
				return 0, fmt.Errorf("the file's columns are %s, not --item-fields %s: write a new file",
					strings.Join(h, ","), strings.Join(opt.Fields, ","))
			}
		} else if err := cw.Write(opt.Fields); err != nil {
			return 0, err
		}
		row := make([]string, len(opt.Fields))
		err = db.ExportItems(ctx, f, func(r store.ItemRow) error {
			n++
			for i, v := range flatValues(r, opt.Fields) {
				row[i] = csvValue(v)
			}
			return cw.Write(row)
		})
		cw.Flush()
		if err == nil {
			err = cw.Error()
		}
	case opt.Format == "jsonl" || opt.Format == "json":
		array := opt.Format == "json"
		enc := json.NewEncoder(bw)
		// an array's items so far: a continued one's, which the file was
		// cut after (its last item, or its opening bracket)
		had := opt.cont.arrayItems
		if array {
			if !opt.cont.on {
				bw.WriteString("[")
			}
			if !had {
				bw.WriteString("\n")
			}
		}
		err = db.ExportItems(ctx, f, func(r store.ItemRow) error {
			if array && (n > 0 || had) {
				bw.WriteString(",\n")
			}
			n++
			var rec any = exportRecord{Crawl: r.Crawl, Rule: r.Rule, Item: r.Item, URL: r.URL,
				FetchedAt: r.FetchedAt.UTC().Format(time.RFC3339Nano), Data: r.Data}
			if len(opt.Fields) > 0 {
				rec = flatObject{names: opt.Fields, values: flatValues(r, opt.Fields)}
			}
			if !array {
				return enc.Encode(rec)
			}
			b, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			_, err = bw.Write(b)
			return err
		})
		if array && err == nil {
			if n > 0 || had {
				bw.WriteString("\n")
			}
			bw.WriteString("]\n")
		}
	case opt.Format == "csv":
		names := map[string]bool{}
		err = db.ExportItems(ctx, f, func(r store.ItemRow) error {
			var m map[string]json.RawMessage
			if json.Unmarshal(r.Data, &m) == nil {
				for k := range m {
					names[k] = true
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		fields := slices.Sorted(maps.Keys(names))
		cw := csv.NewWriter(bw)
		if h := opt.cont.header; h != nil {
			if fields, err = continuedColumns(h, names); err != nil {
				return 0, err
			}
		} else if err := cw.Write(append(slices.Clone(envelopeColumns), fields...)); err != nil {
			return 0, err
		}
		row := make([]string, len(envelopeColumns)+len(fields))
		err = db.ExportItems(ctx, f, func(r store.ItemRow) error {
			n++
			var m map[string]json.RawMessage
			_ = json.Unmarshal(r.Data, &m)
			row[0], row[1], row[2], row[3] = r.Crawl, r.Rule, r.Item, r.URL
			row[4] = r.FetchedAt.UTC().Format(time.RFC3339Nano)
			for i, k := range fields {
				row[len(envelopeColumns)+i] = csvValue(m[k])
			}
			return cw.Write(row)
		})
		cw.Flush()
		if err == nil {
			err = cw.Error()
		}
	default:
		return 0, fmt.Errorf("export: unknown format %q (jsonl, json or csv)", opt.Format)
	}
	if err != nil {
		return n, fmt.Errorf("export items: %w", err)
	}
	return n, bw.Flush()
}

// envelopeColumns are the first columns of a CSV export with the
// envelope, before a column a field.
var envelopeColumns = []string{"crawl", "rule", "item", "url", "fetched_at"}

// continuedColumns are the field columns of a CSV file's header (the
// envelope's first), which rows appended to it keep; the items' fields
// (names) must be among them.
func continuedColumns(header []string, names map[string]bool) ([]string, error) {
	if len(header) < len(envelopeColumns) || !slices.Equal(header[:len(envelopeColumns)], envelopeColumns) {
		return nil, fmt.Errorf("the file's header %q is not an export's (%s, then the fields): write a new file, or give its --item-fields",
			strings.Join(header, ","), strings.Join(envelopeColumns, ","))
	}
	fields := header[len(envelopeColumns):]
	var missing []string
	for k := range names {
		if !slices.Contains(fields, k) {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("the items have fields the file's header lacks (%s): write a new file", strings.Join(missing, ", "))
	}
	return fields, nil
}

// flatValues returns an item's values of the named fields: its data's,
// else the envelope's of that name, else nothing (nil).
func flatValues(r store.ItemRow, names []string) []json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(r.Data, &m)
	out := make([]json.RawMessage, len(names))
	for i, k := range names {
		if v, ok := m[k]; ok {
			out[i] = v
			continue
		}
		env := ""
		switch k {
		case "crawl":
			env = r.Crawl
		case "rule":
			env = r.Rule
		case "item":
			env = r.Item
		case "url":
			env = r.URL
		case "fetched_at":
			env = r.FetchedAt.UTC().Format(time.RFC3339Nano)
		default:
			continue
		}
		out[i], _ = json.Marshal(env)
	}
	return out
}

// flatObject is a JSON object of named values in their order (a missing
// value is null).
type flatObject struct {
	names  []string
	values []json.RawMessage
}

func (o flatObject) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, k := range o.names {
		if i > 0 {
			b = append(b, ',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b = append(append(b, kb...), ':')
		if v := o.values[i]; len(v) > 0 {
			b = append(b, v...)
		} else {
			b = append(b, "null"...)
		}
	}
	return append(b, '}'), nil
}

// csvValue renders one JSON value as a CSV cell: strings as they are,
// numbers and booleans as JSON writes them, lists and objects as JSON.
func csvValue(v json.RawMessage) string {
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var f float64
	if json.Unmarshal(v, &f) == nil {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return string(v)
}
