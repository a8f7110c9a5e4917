package masterd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redcrawl/redcrawl/internal/harness/testutil"
	"github.com/redcrawl/redcrawl/shared/events"
)

// BenchmarkSinkBacklog measures the rows per second one master's sink
// stores into MySQL from a backlog of page events: it writes N realistic
// page events into four slaves' event streams (32 events per entry, as the
// complete script writes a slave's ack batch), then runs the sink exactly
// as Master.Run does until every event is a row in pages. Besides rows/s it
// reports what a row costs and what bounds the rate: CPU of this process
// (the sink: decoding, building statements) and of mariadbd per row, the
// rows per transaction, and per transaction the INSERT statements and the
// fsyncs (Innodb_data_fsyncs: MariaDB 10.11 counts the redo log's
// there too; server-wide counters: other clients of the same
// MariaDB add to them), plus innodb_flush_log_at_trx_commit in force.
//
//	go test -run '^$' -bench SinkBacklog -benchtime 1x ./master/masterd/
//
// REDCRAWL_SINK_BENCH_EVENTS sets N (default 50,000) and
// REDCRAWL_SINK_BENCH_BATCHES the batch sizes (default 100,500,2000),
// REDCRAWL_SINK_BENCH_PER_ENTRY the events per stream entry (default 32;
// a transaction holds whole entries, so at least that many events).
func BenchmarkSinkBacklog(b *testing.B) {
	n := 50000
	if v, err := strconv.Atoi(os.Getenv("REDCRAWL_SINK_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	perEntry := 32
	if v, err := strconv.Atoi(os.Getenv("REDCRAWL_SINK_BENCH_PER_ENTRY")); err == nil && v > 0 && v <= 200 {
		perEntry = v
	}
	batches := []int{100, 500, 2000}
	if v := os.Getenv("REDCRAWL_SINK_BENCH_BATCHES"); v != "" {
		batches = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > 10000 {
				b.Fatalf("REDCRAWL_SINK_BENCH_BATCHES=%q: want batch sizes in [1, 10000], comma-separated", v)
			}
			batches = append(batches, n)
		}
	}
	for _, batch := range batches {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			for range b.N {
				sinkBacklog(b, n, perEntry, batch)
			}
		})
	}
}

func sinkBacklog(b *testing.B, n, perEntry, batch int) {
	b.StopTimer()
	ctx := context.Background()
	f := newSinkFixture(b, "sinkbench")
	slaves := []string{"bench-0", "bench-1", "bench-2", "bench-3"}
	if err := f.fillBacklog(ctx, slaves, 0, n, perEntry, nil); err != nil {
		b.Fatal(err)
	}
	snk := f.newSink("bench", batch)
	if err := snk.stream.EnsureGroup(ctx); err != nil {
		b.Fatal(err)
	}
	var (
		mu     sync.Mutex
		stored int
		txns   int
		done   = make(chan time.Time, 1)
	)
	snk.stored = func(batch []events.Envelope) {
		mu.Lock()
		defer mu.Unlock()
		stored += len(batch)
		txns++
		if stored == n {
			done <- time.Now()
		}
	}
	var flush int64
	if err := f.store.DB.QueryRowContext(ctx, "SELECT @@innodb_flush_log_at_trx_commit").Scan(&flush); err != nil {
		b.Fatal(err)
	}
	statNames := []string{"Innodb_data_fsyncs", "Com_insert", "Com_commit", "Questions", "Com_stmt_prepare"}
	st0, err := mysqlStatus(ctx, f.store, statNames...)
	if err != nil {
		b.Fatal(err)
	}
	db0, dbOK := mariadbCPU()
	go0 := testutil.SelfCPU()

	b.StartTimer()
	start := time.Now()
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); snk.run(sctx) }()
	var end time.Time
	select {
	case end = <-done:
	case <-time.After(10 * time.Minute):
		b.Errorf("sink stored %d of %d events in 10 minutes", stored, n)
	}
	b.StopTimer()
	goCPU := testutil.SelfCPU() - go0
	db1, _ := mariadbCPU()
	st1, err := mysqlStatus(ctx, f.store, statNames...)
	stop()
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	rows, ids, err := countRows(ctx, f.store, f.crawl)
	if err != nil {
		b.Fatal(err)
	}
	if rows != n || ids != n {
		b.Fatalf("pages holds %d rows, %d distinct event ids; want %d", rows, ids, n)
	}
	if b.Failed() {
		return
	}
	el := end.Sub(start)
	b.ReportMetric(float64(n)/el.Seconds(), "rows/s")
	b.ReportMetric(float64(goCPU.Microseconds())/float64(n), "sink-cpu-µs/row")
	if dbOK {
		b.ReportMetric(float64((db1-db0).Microseconds())/float64(n), "mariadb-cpu-µs/row")
	}
	b.ReportMetric(float64(n)/float64(txns), "rows/txn")
	delta := func(k string) float64 { return float64(st1[k]-st0[k]) / float64(txns) }
	b.ReportMetric(delta("Com_insert"), "inserts/txn")
	// a prepared statement's COM_STMT_PREPARE is a round trip Questions
	// does not count (its execute is counted, as BEGIN and COMMIT are)
	b.ReportMetric(delta("Questions")+delta("Com_stmt_prepare"), "mysql-round-trips/txn")
	b.ReportMetric(delta("Com_commit"), "commits/txn")
	b.ReportMetric(delta("Innodb_data_fsyncs"), "fsyncs/txn")
	b.ReportMetric(float64(flush), "flush_log_at_trx_commit")
	b.ReportMetric(float64(goCPU+db1-db0)/float64(el), "cpus-busy")
}

// mariadbCPU is the user + system CPU time of the local mariadbd (or
// mysqld) process, from /proc/<pid>/stat; false when there is none.
func mariadbCPU() (time.Duration, bool) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue
		}
		if c := strings.TrimSpace(string(comm)); c != "mariadbd" && c != "mysqld" {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			return 0, false
		}
		// fields after the parenthesised command: state is field 3,
		// utime 14, stime 15
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 13 {
			return 0, false
		}
		ut, err1 := strconv.ParseInt(fields[11], 10, 64)
		st, err2 := strconv.ParseInt(fields[12], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		const hz = 100 // USER_HZ on Linux
		return time.Duration(ut+st) * time.Second / hz, true
	}
	return 0, false
}
