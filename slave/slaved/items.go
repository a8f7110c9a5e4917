package slaved

import (
	"context"
	"fmt"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/extract"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// extractItems runs the item rules of a page's rule set on the document
// (extractDoc) and adds an item record per item (through the OnItem
// hooks), and an extract exception per field that failed, naming rule
// set, item and field so the admin can fix the rule.
func (s *Slave) extractItems(ctx context.Context, c *frontier.Completion, rs *rules.RuleSet, d *Doc, fetchedAt int64) {
	items, problems := extractDoc(rs, d, c.Lease.URL)
	for _, msg := range problems {
		s.exception(c, events.KindExtract, 0, msg)
	}
	for _, it := range items {
		// through the OnItem hooks (hooks.go), then to the master
		s.emitItem(ctx, c, it, fetchedAt)
	}
}

// extractDoc runs the item rules of a rule set that cover a document's
// URL and apply to its media type (rules.ItemRule.AppliesTo) on the
// document (its UTF-8 text when a handler decoded it), without the
// frontier: the items found, keyed by pageURL, and a message per field
// that failed.
func extractDoc(rs *rules.RuleSet, d *Doc, pageURL string) ([]*Item, []string) {
	var its []*rules.ItemRule
	for _, it := range rs.ItemsFor(d.URL) {
		if it.AppliesTo(d.MediaType) { // HTML unless the rule says otherwise (types)
			its = append(its, it)
		}
	}
	if len(its) == 0 {
		return nil, nil
	}
	body := d.Text
	if body == nil {
		var err error
		if body, err = d.Body.Bytes(); err != nil {
			return nil, []string{fmt.Sprintf("rule %s: read body: %v", rs.Name, err)}
		}
	}
	doc := extract.Document{URL: d.URL, ContentType: d.Header.Get("Content-Type"), Body: body}
	var items []*Item
	var problems []string
	for _, it := range its {
		item, ferrs := it.Extractor.Extract(doc)
		for _, fe := range ferrs {
			problems = append(problems, fmt.Sprintf("rule %s item %s field %s: %s", rs.Name, it.Name, fe.Field, fe.Reason))
		}
		if len(item) > 0 {
			items = append(items, &Item{Name: it.Name, Rule: rs.Name, URL: pageURL, PageURL: pageURL, Fields: item})
		}
	}
	return items, problems
}
