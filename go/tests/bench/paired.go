package main

import (
	"fmt"
	"os"
	"time"
)

// pairedBatch is how many operations a configuration of a paired case runs
// before the next one takes its turn: ~50 ms of a WASM plugin's events, so
// that what slows the machine down for a while (another tenant of the
// host, a frequency change) falls on both alike.
const pairedBatch = 50

// runPaired measures an event case whose configurations' figures differ
// by less than the machine's drift from one round to the next, as the
// same WASM module on the same engine (upstream's wazero) does under
// upstream's adaptation and under nri-rs's. Run after each other, a round
// of one and a round of the other each took ~2 s, and their ratio moved
// by ±10 % between runs. Here each round starts every configuration's
// adaptation in this process, then runs their measured operations in
// alternating batches, whose order turns from batch to batch; each
// configuration's figures are over its own operations only.
func (h *harness) runPaired(c *caseDef, rounds int) caseResult {
	loadStart := loadAverage()
	configs := c.emptyResults()
	for r := 0; r < rounds; r++ {
		t0 := time.Now()
		res, err := h.pairedRound(c, r)
		if err != nil {
			msg := fmt.Sprintf("round %d: %v", r, err)
			for i := range configs {
				configs[i].Errors = append(configs[i].Errors, msg)
			}
			fmt.Fprintf(os.Stderr, "bench: %s: %s\n", c.Name, msg)
			continue
		}
		for i, rr := range res {
			h.logf("%-22s %-8s %-9s round %d: p50 %9.1f µs  p99 %9.1f µs  cpu %8.1f µs/op  allocs %8.0f/op (paired, %v)",
				c.Name, configs[i].Impl, configs[i].Stub, r, rr.P50us, rr.P99us, rr.CPUusPerOp, rr.AllocsPerOp,
				time.Since(t0).Round(time.Millisecond))
			configs[i].Rounds = append(configs[i].Rounds, rr)
		}
	}
	for i := range configs {
		summarize(&configs[i])
	}
	out := c.caseResult
	out.Paired = true
	out.Configs = configs
	out.LoadStart, out.LoadEnd = loadStart, loadAverage()
	return out
}

// pairedRound is one round of runPaired: every configuration's result, or
// the first failure.
func (h *harness) pairedRound(c *caseDef, round int) ([]roundResult, error) {
	runs := make([]*eventRun, 0, len(c.configs))
	defer func() {
		for _, e := range runs {
			e.close()
		}
	}()
	for _, cfg := range c.configs {
		e, err := startEvents(h, c, cfg[0], cfg[1], c.mk)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", cfg[0], cfg[1], err)
		}
		runs = append(runs, e)
	}
	settle()
	for _, e := range runs {
		e.before = takeSample()
	}
	for b := 0; b*pairedBatch < c.ops; b++ {
		n := min(pairedBatch, c.ops-b*pairedBatch)
		for j := range runs {
			i := (j + b) % len(runs)
			if err := runs[i].measure(n); err != nil {
				return nil, fmt.Errorf("%s/%s: %w", c.configs[i][0], c.configs[i][1], err)
			}
		}
	}
	res := make([]roundResult, len(runs))
	for i, e := range runs {
		res[i].Round = round
		if err := e.finish(&res[i]); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", c.configs[i][0], c.configs[i][1], err)
		}
		res[i].RSSGrowthKiB = 0
	}
	return res, nil
}
