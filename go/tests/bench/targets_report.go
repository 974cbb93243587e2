package main

import (
	"fmt"
	"strings"
)

// writeTargets writes the targets section: one row per target, or per
// family of targets sharing a limit over many cases (their figures are
// the case table's ratios), then every missed target with what limits it.
func writeTargets(w func(string, ...any), targets []target) {
	type row struct {
		what, limit         string
		met, missed, absent int
		lo, hi              float64
		single              *target
	}
	var rows []*row
	byFamily := map[string]*row{}
	for i := range targets {
		t := &targets[i]
		key := t.Family
		if key == "" {
			key = t.What
		}
		rw := byFamily[key]
		if rw == nil || t.Family == "" {
			rw = &row{what: key, limit: limitText(t), single: t}
			rows = append(rows, rw)
			byFamily[key] = rw
		} else {
			rw.single = nil
		}
		switch {
		case t.Missing:
			rw.absent++
			continue
		case t.Met:
			rw.met++
		default:
			rw.missed++
		}
		if rw.met+rw.missed == 1 || t.Ratio < rw.lo {
			rw.lo = t.Ratio
		}
		if rw.met+rw.missed == 1 || t.Ratio > rw.hi {
			rw.hi = t.Ratio
		}
	}
	w("## Targets\n\nA row with many cases covers every case of the table below that it names (\"Cases\" has each ratio); ")
	w("each missed target is listed after the table with what limits it, as measured.\n\n")
	w("| target | limit | result | measured (nri-rs / reference) |\n|---|---|---|---|\n")
	for _, rw := range rows {
		if t := rw.single; t != nil {
			measured := t.Measured
			if !t.Missing {
				measured += " = " + ratioText(t)
			}
			w("| %s | %s | %s | %s |\n", t.What, rw.limit, verdict(t), measured)
			continue
		}
		n := rw.met + rw.missed + rw.absent
		result := fmt.Sprintf("**met** in all %d", n)
		if n == 2 {
			result = "**met** in both"
		}
		if rw.missed > 0 || rw.absent > 0 {
			result = fmt.Sprintf("met in %d of %d", rw.met, n)
			if rw.absent > 0 {
				result += fmt.Sprintf(", %d not measured", rw.absent)
			}
		}
		w("| %s | %s | %s | %s to %s |\n", rw.what, rw.limit, result, fmtRatio(rw.lo), fmtRatio(rw.hi))
	}
	var missed []string
	for _, t := range targets {
		if !t.Met && !t.Missing {
			missed = append(missed, fmt.Sprintf("- **%s**: %s = %s (limit %s). %s.", t.What, t.Measured, ratioText(&t),
				limitText(&t), capitalize(t.Limits)))
		}
	}
	if len(missed) > 0 {
		w("\n### Missed targets\n\n%s\n", strings.Join(missed, "\n"))
	}
	w("\n")
}

func verdict(t *target) string {
	switch {
	case t.Missing:
		return "not measured"
	case t.Met:
		return "**met**"
	}
	return "missed"
}

func limitText(t *target) string {
	if t.Limit > 100 { // an absolute count, not a ratio
		return fmt.Sprintf("≤ %.0f", t.Limit)
	}
	if t.AtLeast {
		return fmt.Sprintf("≥ %g×", t.Limit)
	}
	return fmt.Sprintf("≤ %g×", t.Limit)
}

func ratioText(t *target) string {
	if t.Missing {
		return "–"
	}
	if t.Limit > 100 {
		return fmt.Sprintf("%.0f", t.Ratio)
	}
	return fmtRatio(t.Ratio)
}

func capitalize(s string) string {
	if s == "" {
		return "Not profiled"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
