package slaved

import "time"

// Idle connections of the fetch transports.
//
// A crawl of a few hosts should reuse a connection for many fetches: a
// host has up to politeness.host_concurrency fetches in flight (its leases,
// across slaves), so it needs that many connections, and the hosts in play
// at once are more than slave.concurrency / host_concurrency, as the
// workers move between hosts while a host waits out its delay (20 hosts × 4
// = 80 connections for 64 workers). With room for only slave.concurrency
// idle connections in all, the transport closed the least recently used
// one whenever a fetch ended and another host's was dialed. A broad crawl
// meets each host a few times, far apart: its idle connections are of no
// use, and must not pile up to thousands of sockets (an idle connection
// holds two goroutines and 8 KiB of buffers).

const (
	// idlePerWorker idle connections in all for each of slave.concurrency
	idlePerWorker = 4
	// maxIdleTotal caps the idle connections of a transport whatever the
	// concurrency
	maxIdleTotal = 1024
	// idleTimeout closes a connection unused this long: longer than a
	// politeness delay between a host's fetches, short enough that a broad
	// crawl's connections to hosts it is done with go soon
	idleTimeout = 30 * time.Second
)

type idleConns struct {
	total, perHost int
	timeout        time.Duration
}

// idleLimits returns the idle connection limits of a transport of a slave
// of concurrency fetch workers and hostConcurrency fetches a host.
// Per host it keeps hostConcurrency (at least 2: a robots.txt fetch and a
// page); in all idlePerWorker × concurrency, at least one host's worth and
// at most maxIdleTotal. A proxy's transport is built from the same template
// (session.Options.TransportTemplate); the session pool raises the per-host
// limit of an http(s) proxy's transport, whose plain-http fetches all share
// the connections to one "host", the proxy.
func idleLimits(concurrency, hostConcurrency int) idleConns {
	perHost := max(2, hostConcurrency)
	total := min(max(idlePerWorker*concurrency, perHost), maxIdleTotal)
	return idleConns{total: total, perHost: perHost, timeout: idleTimeout}
}
