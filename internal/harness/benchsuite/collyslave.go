package benchsuite

import (
	"context"
	"fmt"
	"math"
	"sort"
)

// The colly-callback slave (Options.CollySlaveBinary): the same site
// crawled by slaves that run a colly collector through slave/collyslave,
// beside the stock slave's crawl of as many slaves in the same round. It
// costs colly's own parsing (a goquery DOM per page, on top of the
// slave's own pass over the HTML) and its callbacks.

// collySlave is the colly-callback slave's program.
func (b *bench) collySlave() slaveProgram {
	return slaveProgram{colly: true, binary: b.opt.CollySlaveBinary, inProcess: b.opt.CollySlaveInProcess}
}

// runCollySlaves crawls the site with each count of colly-callback slaves
// after a round's stock crawls.
func (b *bench) runCollySlaves(ctx context.Context, rd *round) error {
	for _, n := range b.opt.CollySlaves {
		r, err := b.runCrawl(ctx, n, b.collySlave())
		if err != nil {
			return err
		}
		r.VsColly = ratio(r.PagesPerSec, rd.colly.PagesPerSec)
		r.VsColly99 = ratio(r.PagesPerSec99, rd.colly.PagesPerSec99)
		rd.collyRuns = append(rd.collyRuns, r)
		vs := rd.vsStock(r)
		fmt.Fprintf(b.opt.Out, "bench: %d colly-callback slave(s): %d pages in %.1fs, %.0f pages/s (%s× the stock slave's), slave CPU %s s / 1,000 pages (%s× the stock slave's)\n",
			n, r.Pages, r.Seconds, r.PagesPerSec, fmtF(vs.PagesPerSec, 2), fmtF(r.SlaveCPUPer1k, 2), fmtF(vs.CPU, 2))
		freeMemory()
	}
	return nil
}

// vsStock compares a colly-callback crawl with the round's stock crawl of
// as many slaves.
func (rd *round) vsStock(r *RunResult) StockRatio {
	for _, s := range rd.runs {
		if s != nil && s.Slaves == r.Slaves {
			return StockRatio{PagesPerSec: ratio(r.PagesPerSec, s.PagesPerSec), CPU: ratio(r.SlaveCPUPer1k, s.SlaveCPUPer1k)}
		}
	}
	return StockRatio{PagesPerSec: math.NaN(), CPU: math.NaN()}
}

// collyMedians keeps, for each count of colly-callback slaves, its median
// round (by its pages/s against the stock slave's) and the ratios of
// every round.
func (r *Report) collyMedians(counts []int, rounds []round) {
	if len(counts) == 0 || len(rounds) == 0 {
		return
	}
	r.CollyVsStock, r.CollyVsStockRounds = map[int]StockRatio{}, map[int][]StockRatio{}
	for k, n := range counts {
		type pick struct {
			run *RunResult
			vs  StockRatio
		}
		var ps []pick
		var cpu []float64
		for _, rd := range rounds {
			p := pick{run: rd.collyRuns[k], vs: rd.vsStock(rd.collyRuns[k])}
			ps = append(ps, p)
			r.CollyVsStockRounds[n] = append(r.CollyVsStockRounds[n], p.vs)
			cpu = append(cpu, p.vs.CPU)
		}
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].vs.PagesPerSec < ps[j].vs.PagesPerSec })
		med := ps[(len(ps)-1)/2]
		r.CollyRuns = append(r.CollyRuns, med.run)
		r.CollyVsStock[n] = StockRatio{PagesPerSec: med.vs.PagesPerSec, CPU: median(cpu)}
	}
}
