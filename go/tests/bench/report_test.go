package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The reports rendered from the committed results files (docs/), as
// -report-only renders them: nothing is run. Every figure of the results
// that the report carried before it was made shorter is still in it.
func TestRenderCommittedPerformanceReport(t *testing.T) {
	res, err := readResults("../../../docs/performance.json")
	if err != nil {
		t.Fatal(err)
	}
	res.Targets = evaluateTargets(res)
	md := markdown(res, "performance.json", "performance.png")
	if n := strings.Count(md, "\n"); n > 210 {
		t.Errorf("the generated part has %d lines; PERFORMANCE.md is to stay under 300 in all", n)
	}
	for _, s := range []string{"## Targets", "## Cases", "## Floors", "## Pod-start storm", "## Plugin footprint",
		"## Runtime layout of the Rust core", "## Instructions of the core", "performance.png"} {
		if !strings.Contains(md, s) {
			t.Errorf("report lacks %q", s)
		}
	}
	// Each missed target is listed with its figures and what limits it.
	for _, tg := range res.Targets {
		if tg.Met || tg.Missing {
			continue
		}
		if !strings.Contains(md, "- **"+tg.What+"**: "+tg.Measured) || !strings.Contains(md, tg.Limits[1:]) {
			t.Errorf("missed target %q not listed with its figures and limits", tg.What)
		}
	}
	// Each configuration's p50, p99 and CPU, and its ratios to upstream.
	for _, c := range res.Cases {
		if c.Kind == "floor" || c.Kind == "storm" {
			continue
		}
		for _, cf := range c.Configs {
			for _, v := range []float64{cf.P50us, cf.P99us, cf.CPUusPerOp} {
				if !strings.Contains(md, fmtUs(v)) {
					t.Errorf("%s %s/%s: %s not in the report", c.Name, cf.Impl, cf.Stub, fmtUs(v))
				}
			}
		}
	}
	for _, tg := range res.Targets {
		if tg.Family == "" && !strings.Contains(md, "| "+tg.What+" |") {
			t.Errorf("target %q has no row", tg.What)
		}
	}
	// The committed report is this rendering (bench -report-only).
	doc, err := os.ReadFile("../../../docs/PERFORMANCE.md")
	if err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(string(doc), endMarker); i < 0 || strings.TrimSpace(string(doc[:i])) != strings.TrimSpace(md) {
		t.Error("docs/PERFORMANCE.md's generated part is not what docs/performance.json renders to: " +
			"bench -report-only -out docs/performance.json -doc docs/PERFORMANCE.md -png docs/performance.png")
	}
}

func TestRenderCommittedSoakReport(t *testing.T) {
	data, err := os.ReadFile("../../../docs/soak.json")
	if err != nil {
		t.Fatal(err)
	}
	var r soakResults
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	md := soakMarkdown(&r, "soak.json", "soak.png")
	for _, v := range r.Verdicts {
		want := fmt.Sprintf("%s: **passed**", v.Impl)
		if len(v.Problems) > 0 {
			want = v.Impl + ": **failed**"
		}
		if !strings.Contains(md, want) {
			t.Errorf("soak report lacks %q", want)
		}
	}
	doc, err := os.ReadFile("../../../docs/RELIABILITY.md")
	if err != nil {
		t.Fatal(err)
	}
	b, e := strings.Index(string(doc), soakBegin), strings.Index(string(doc), soakEnd)
	if b < 0 || e < b || strings.TrimSpace(string(doc[b+len(soakBegin):e])) != strings.TrimSpace(md) {
		t.Error("docs/RELIABILITY.md's soak section is not what docs/soak.json renders to")
	}
}
