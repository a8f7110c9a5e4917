package redisconn

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redcrawl/redcrawl/shared/config"
)

// TestNew checks the kind of client New makes: one node, or a cluster of
// the url's addresses.
func TestNew(t *testing.T) {
	c := config.Default()
	rdb, err := New(&c)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	if _, ok := rdb.(*redis.Client); !ok {
		t.Errorf("single node: %T", rdb)
	}
	c.Redis.Cluster = true
	c.Redis.URL = "redis://:pw@127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	rdb, err = New(&c)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Close()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok || len(cc.Options().Addrs) != 3 {
		t.Errorf("cluster: %T %+v", rdb, cc.Options().Addrs)
	}
	if cc.Options().Dialer == nil {
		t.Error("the cluster client has no dialer")
	}
	c.Redis.URL = "redis://127.0.0.1:7000/3" // a cluster has only db 0
	if err := c.Validate(); err == nil {
		t.Error("a cluster url with a database validated")
	}
}
