package slaved

import (
	"context"
	"fmt"

	"github.com/redcrawl/redcrawl/shared/events"
	"github.com/redcrawl/redcrawl/shared/extract"
	"github.com/redcrawl/redcrawl/shared/frontier"
	"github.com/redcrawl/redcrawl/shared/rules"
)

// extractItems runs the item rules of a page's rule set that apply to its
// media type (rules.ItemRule.AppliesTo) on the document
// (its UTF-8 text when a handler decoded it) and adds an item record per
// item rule (through the OnItem hooks), and an extract exception per field that failed, naming rule
// set, item and field so the admin can fix the rule.
func (s *Slave) extractItems(ctx context.Context, c *frontier.Completion, rs *rules.RuleSet, d *Doc, fetchedAt int64) {
	var its []*rules.ItemRule
	for _, it := range rs.ItemsFor(d.URL) {
		if it.AppliesTo(d.MediaType) { // HTML unless the rule says otherwise (types)
			its = append(its, it)
		}
	}
	if len(its) == 0 {
		return
	}
	body := d.Text
	if body == nil {
		var err error
		if body, err = d.Body.Bytes(); err != nil {
			s.exception(c, events.KindExtract, 0, fmt.Sprintf("rule %s: read body: %v", rs.Name, err))
			return
		}
	}
	doc := extract.Document{URL: d.URL, ContentType: d.Header.Get("Content-Type"), Body: body}
	for _, it := range its {
		item, ferrs := it.Extractor.Extract(doc)
		for _, fe := range ferrs {
			s.exception(c, events.KindExtract, 0, fmt.Sprintf("rule %s item %s field %s: %s", rs.Name, it.Name, fe.Field, fe.Reason))
		}
		if len(item) == 0 {
			continue
		}
		// through the OnItem hooks (hooks.go), then to the master
		s.emitItem(ctx, c, &Item{Name: it.Name, Rule: rs.Name, URL: c.Lease.URL, PageURL: c.Lease.URL,
			Fields: item}, fetchedAt)
	}
}
