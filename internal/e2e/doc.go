// Package e2e holds the end-to-end crawls: a master, slaves in this
// process, slave processes and slaves of the work API crawl the test site
// against the real Redis (single, sharded, Cluster) and MariaDB, through
// outages, killed slaves, hot-reloaded rules, recrawls and schedules. Its
// scaffolding is internal/harness/crawltest; a package's own tests stay
// beside it.
package e2e
