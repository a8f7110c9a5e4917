package masterd

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/config"
)

// ExportOptions select the items to export.
type ExportOptions struct {
	Crawl, Rule, Item string
	Format            string // jsonl or csv
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
	f := store.ItemFilter{Crawl: opt.Crawl, Rule: opt.Rule, Item: opt.Item}
	bw := bufio.NewWriterSize(w, 64<<10)
	n := 0
	switch opt.Format {
	case "jsonl":
		enc := json.NewEncoder(bw)
		err = db.ExportItems(ctx, f, func(r store.ItemRow) error {
			n++
			return enc.Encode(exportRecord{Crawl: r.Crawl, Rule: r.Rule, Item: r.Item, URL: r.URL,
				FetchedAt: r.FetchedAt.UTC().Format(time.RFC3339Nano), Data: r.Data})
		})
	case "csv":
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
		fields := make([]string, 0, len(names))
		for k := range names {
			fields = append(fields, k)
		}
		sort.Strings(fields)
		cw := csv.NewWriter(bw)
		if err := cw.Write(append([]string{"crawl", "rule", "item", "url", "fetched_at"}, fields...)); err != nil {
			return 0, err
		}
		row := make([]string, 5+len(fields))
		err = db.ExportItems(ctx, f, func(r store.ItemRow) error {
			n++
			var m map[string]json.RawMessage
			_ = json.Unmarshal(r.Data, &m)
			row[0], row[1], row[2], row[3] = r.Crawl, r.Rule, r.Item, r.URL
			row[4] = r.FetchedAt.UTC().Format(time.RFC3339Nano)
			for i, k := range fields {
				row[5+i] = csvValue(m[k])
			}
			return cw.Write(row)
		})
		cw.Flush()
		if err == nil {
			err = cw.Error()
		}
	default:
		return 0, fmt.Errorf("export: unknown format %q (jsonl or csv)", opt.Format)
	}
	if err != nil {
		return n, fmt.Errorf("export items: %w", err)
	}
	return n, bw.Flush()
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
