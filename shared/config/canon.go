package config

import (
	"fmt"

	"github.com/redcrawl/redcrawl/shared/urlx"
)

// Canonicalizer returns the crawl's URL canonicalizer: crawl.strip_params
// and crawl.sort_query. Master (seeds) and slaves (links, redirects,
// sitemaps) build it here, so that both give a URL the same canonical
// form.
func (c *Config) Canonicalizer() (*urlx.Canonicalizer, error) {
	canon, err := urlx.NewCanonicalizerWith(urlx.Options{StripParams: c.Crawl.StripParams, SortQuery: c.Crawl.SortQuery})
	if err != nil {
		return nil, fmt.Errorf("crawl.strip_params: %w", err)
	}
	return canon, nil
}
