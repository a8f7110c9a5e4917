package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/crawltest"
	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/master/slaveproc"
	"github.com/redcrawl/redcrawl/master/store"
	"github.com/redcrawl/redcrawl/shared/events"
	api "github.com/redcrawl/redcrawl/shared/workapi"
)

// buildMaster builds bin/master once for tests that run it as a process.
var buildMaster = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "redcrawl-master-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "master")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/redcrawl/redcrawl/master")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build master: %v\n%s", err, out)
	}
	return bin, nil
})

// maxMasterRSS is the bound on the master's memory under hostile tokens.
const maxMasterRSS = 300 << 20

// TestHostileAPIMemory: tokens that send largest bodies as fast as they
// can, 8 at once from one token and then 100 at once from 10 tokens,
// keep the master (a process of its own) under 300 MiB of RSS at its
// peak, while two honest slaves of the API crawl the whole site.
func TestHostileAPIMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a master process and 30 s of floods")
	}
	bin, err := buildMaster()
	if err != nil {
		t.Fatal(err)
	}
	cfg := crawltest.Config(t)
	// a crawl of 35 s at least (1,100 pages on 5 hosts, 150 ms apart on
	// each), longer than the floods: they hit a master at work
	cfg.Politeness.Delay = 150 * time.Millisecond
	site := crawltest.StartSite(t, 0)
	crawltest.Seed(t, cfg, site)
	a := crawltest.WithAPI(t, cfg)
	var toks []string
	for i := range 10 {
		toks = append(toks, readToken(t, a.Config(fmt.Sprintf("flood-%d", i)).Slave.API.TokenFile))
	}
	path, err := slaveproc.WriteConfig(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", path, "--exit-when-done")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	cl := apiHTTPClient(t, a.CA())
	base := "https://" + cfg.API.Listen
	waitAPIUp(t, cl, base)

	// the floods' bodies, each just under api.max_body: completions of a
	// lease never held with links enough to pass every bound, and records
	// of no page to publish
	maxBody := int(cfg.API.MaxBody)
	var links strings.Builder
	links.WriteString(`{"completions":[{"lease":{"url":"http://x.test/","token":1},"outcome":"done","links":[`)
	for links.Len() < maxBody-64 {
		links.WriteString(`{"url":"http://x.test/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},`)
	}
	linksBody := strings.TrimSuffix(links.String(), ",") + `]}]}`
	_, data, _ := events.Encode(&events.Exception{Kind: events.KindRender, Message: strings.Repeat("m", 1000<<10)})
	var evs strings.Builder
	evs.WriteString(`{"events":[`)
	for evs.Len()+len(data)+64 < maxBody {
		if evs.Len() > len(`{"events":[`) {
			evs.WriteByte(',')
		}
		evs.WriteString(`{"type":"exception","data":`)
		evs.Write(data)
		evs.WriteByte('}')
	}
	evs.WriteString(`]}`)
	bodies := []struct{ path, body string }{{api.PathComplete, linksBody}, {api.PathEvents, evs.String()}}

	var peak atomic.Int64
	stopSample := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Add(1)
	go func() {
		defer sampler.Done()
		for {
			if rss := testutil.ProcStatus(cmd.Process.Pid, "VmHWM"); rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-stopSample:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	flood := func(label string, tokens []string, perToken int, d time.Duration) {
		var wg sync.WaitGroup
		codes := map[int]int{}
		var mu sync.Mutex
		deadline := time.Now().Add(d)
		for _, tok := range tokens {
			for i := range perToken {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; time.Now().Before(deadline); n++ {
						b := bodies[(i+n)%len(bodies)]
						code, _ := apiDoErr(cl, base, tok, http.MethodPost, b.path, b.body)
						mu.Lock()
						codes[code]++
						mu.Unlock()
					}
				}()
			}
		}
		hits := len(site.Hits())
		wg.Wait()
		t.Logf("%s: answers by status %v; master RSS peak so far %d MiB; %d requests to the site meanwhile",
			label, codes, peak.Load()>>20, len(site.Hits())-hits)
		select {
		case err := <-exited:
			t.Fatalf("the master exited during the floods (%v): they tested nothing\n%s", err, tail(logs.String(), 4000))
		default:
		}
		if len(site.Hits()) == hits {
			t.Errorf("%s: the honest slaves fetched nothing meanwhile", label)
		}
	}
	honest := []*crawltest.SlaveHandle{a.Start("honest-1"), a.Start("honest-2")}
	// the floods start once the crawl is under way: a lease lost under
	// them costs a re-fetch, but the seed lost max_attempts times, when it
	// is all there is, would end the crawl
	for end := time.Now().Add(time.Minute); len(site.Hits()) < 100; {
		if time.Now().After(end) {
			t.Fatalf("the honest slaves made %d requests to the site in a minute", len(site.Hits()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	flood("8 at once from one token", toks[:1], 8, 12*time.Second)
	flood("100 at once from 10 tokens", toks, 10, 12*time.Second)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("master: %v\n%s", err, tail(logs.String(), 4000))
		}
	case <-ctx.Done():
		t.Fatalf("the crawl did not finish in 4 minutes\n%s", tail(logs.String(), 4000))
	}
	close(stopSample)
	sampler.Wait()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the master's log:\n%s", tail(logs.String(), 6000))
		}
	})
	for _, h := range honest {
		h.Stop()
	}
	hwm := peak.Load()
	t.Logf("master RSS peak: %d MiB (bound %d MiB)", hwm>>20, maxMasterRSS>>20)
	if hwm > maxMasterRSS {
		t.Errorf("the master's RSS peaked at %d MiB, over %d MiB", hwm>>20, maxMasterRSS>>20)
	}
	// a completion the floods held up past its lease is a lost lease: its
	// page is fetched again, never missed
	db, err := store.Open(context.Background(), cfg.MySQL.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lost, err := db.LostTasks(context.Background(), cfg.Crawl.Name, 10000)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d leases lost under the floods", len(lost))
	crawltest.CheckCrawlRobots(t, cfg, site, lost, 2)
	// the honest slaves' records were all taken: nothing of theirs refused
	for _, slave := range []string{"honest-1", "honest-2"} {
		exc, err := db.Exceptions(context.Background(), store.ExceptionFilter{Crawl: cfg.Crawl.Name,
			Kind: events.KindInvalidInput, Slave: slave})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range exc {
			t.Errorf("an honest slave's record refused: %s", x.Message)
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
