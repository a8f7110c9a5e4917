// Package faults holds the end-to-end crawls under faults: Redis Cluster
// failovers (one, and one at each tenth of a crawl) and the soak, a crawl
// under random faults of every kind from a fixed seed (internal/harness/
// soak). They are apart from internal/e2e so that the two long packages
// run side by side under go test.
package faults
