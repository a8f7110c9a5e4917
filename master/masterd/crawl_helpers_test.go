package masterd_test

// The crawl scaffolding of internal/harness/crawltest under the names the
// crawl tests still beside the master use (the work API's, the
// dashboard's, the hostile slaves', failover); the other end-to-end crawls
// are in internal/e2e.

import (
	"testing"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/shared/config"
)

type (
	slaveHandle  = crawltest.SlaveHandle
	lockedBuffer = crawltest.LockedBuffer
)

func clusterConfig(t *testing.T) *config.Config { return crawltest.Config(t) }

var (
	testLogger       = crawltest.Logger
	startSite        = crawltest.StartSite
	startSlave       = crawltest.StartSlave
	seed             = crawltest.Seed
	runMaster        = crawltest.RunMaster
	runWithSlave     = crawltest.RunWithSlave
	checkCrawl       = crawltest.CheckCrawl
	checkCrawlRobots = crawltest.CheckCrawlRobots
	buildSlave       = crawltest.BuildSlave
	slaveEnv         = crawltest.SlaveEnv
)
