package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The plot: one group of horizontal bars per case, one bar per
// configuration, p50 latency on a log scale with a tick at p99. Drawn with
// the standard library's image/png and x/image's bitmap font.

var configColors = map[string]color.RGBA{
	implUpstream + "/" + stubGo:   {0x1f, 0x77, 0xb4, 0xff}, // blue
	implUpstream + "/" + stubRust: {0x9e, 0xc9, 0xe8, 0xff}, // light blue
	implNriRs + "/" + stubGo:      {0xd6, 0x4a, 0x0b, 0xff}, // orange-red
	implNriRs + "/" + stubRust:    {0xf7, 0xa8, 0x5e, 0xff}, // light orange
	implUpstream + "/" + stubWasm: {0x2c, 0xa0, 0x2c, 0xff}, // green
	implNriRs + "/" + stubWasm:    {0x98, 0xdf, 0x8a, 0xff}, // light green
	"floor":                       {0x55, 0x55, 0x55, 0xff},
}

func configLabel(impl, stub string) string {
	if impl == "floor" {
		return "floor"
	}
	if stub == stubNone {
		return impl + " runtime, no plugin"
	}
	if stub == stubWasm {
		return impl + " runtime, WASM plugins"
	}
	return impl + " runtime, " + stub + "-stub plugins"
}

// ascii replaces what the bitmap font lacks.
func ascii(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "µ", "u"), "×", "x") }

func writeChart(r *results, path string) error {
	type bar struct {
		label    string
		p50, p99 float64
		color    color.RGBA
	}
	type group struct {
		title string
		bars  []bar
	}
	var groups []group
	for _, c := range r.Cases {
		if c.Kind == "start" || c.Kind == "storm" { // seconds, or a pod's several events
			continue
		}
		g := group{title: c.Title}
		if c.Kind == "floor" {
			g.title = c.Name
		}
		for _, cf := range c.Configs {
			if len(cf.Rounds) == 0 {
				continue
			}
			key := cf.Impl + "/" + cf.Stub
			switch {
			case cf.Impl == "floor":
				key = "floor"
			case cf.Stub == stubNone:
				key = cf.Impl + "/" + stubGo
			}
			g.bars = append(g.bars, bar{label: configLabel(cf.Impl, cf.Stub), p50: cf.P50us, p99: cf.P99us, color: configColors[key]})
		}
		if len(g.bars) > 0 {
			groups = append(groups, g)
		}
	}

	const (
		width    = 1400
		left     = 430
		right    = 40
		top      = 70
		barH     = 11
		groupGap = 12
	)
	height := top + 60
	for _, g := range groups {
		height += len(g.bars)*barH + groupGap
	}
	cv := newCanvas(width, height)
	text, textWidth, fill := cv.text, cv.textWidth, cv.fill

	// Log scale from 1 µs to the decade above the slowest p99.
	maxV := 10.0
	for _, g := range groups {
		for _, b := range g.bars {
			maxV = math.Max(maxV, math.Max(b.p50, b.p99))
		}
	}
	lo, hi := 0.0, math.Ceil(math.Log10(maxV))
	x := func(us float64) int {
		if us < 1 {
			us = 1
		}
		return left + int(float64(width-left-right)*(math.Log10(us)-lo)/(hi-lo))
	}
	text(10, 20, "nri-rs vs upstream NRI v0.12.5: p50 latency per case (log scale; tick = p99)", color.Black)
	sub := fmt.Sprintf("%d x %s, load %s", r.Machine.CPUs, r.Machine.Model, loadStr(r.Machine.Load))
	if r.Settings.Smoke {
		sub += "  [SMOKE RUN: meaningless numbers]"
	}
	text(10, 38, sub, color.RGBA{0x44, 0x44, 0x44, 0xff})
	// Legend.
	lx := 10
	for _, k := range [][2]string{{implUpstream, stubGo}, {implUpstream, stubRust}, {implNriRs, stubGo}, {implNriRs, stubRust},
		{implUpstream, stubWasm}, {implNriRs, stubWasm}, {"floor", ""}} {
		key := k[0] + "/" + k[1]
		if k[0] == "floor" {
			key = "floor"
		}
		fill(lx, 48, lx+12, 60, configColors[key])
		l := configLabel(k[0], k[1])
		text(lx+16, 59, l, color.Black)
		lx += 16 + textWidth(l) + 24
	}
	// Grid: one line per decade.
	gridBottom := height - 40
	for d := lo; d <= hi; d++ {
		gx := x(math.Pow(10, d))
		fill(gx, top, gx+1, gridBottom, color.RGBA{0xdd, 0xdd, 0xdd, 0xff})
		lbl := fmtUs(math.Pow(10, d))
		text(gx-textWidth(lbl)/2, gridBottom+16, lbl, color.Black)
	}
	y := top
	for _, g := range groups {
		gy := y + (len(g.bars)*barH)/2 + 4
		title := g.title
		for textWidth(title) > left-16 && len(title) > 4 {
			title = title[:len(title)-4] + "..."
		}
		text(8, gy, title, color.Black)
		for _, b := range g.bars {
			fill(left, y+1, x(b.p50), y+barH-1, b.color)
			px := x(b.p99)
			fill(px, y+1, px+2, y+barH-1, color.Black)
			fill(x(b.p50), y+barH/2, px, y+barH/2+1, color.RGBA{0x77, 0x77, 0x77, 0xff})
			v := fmtUs(b.p50)
			text(max(px, x(b.p50))+5, y+barH-1, v, color.RGBA{0x33, 0x33, 0x33, 0xff})
			y += barH
		}
		y += groupGap
	}
	fill(left, top, left+1, gridBottom, color.Black)
	text(left, gridBottom+32, "latency per operation", color.Black)
	return cv.save(path)
}

// canvas is a white image to draw bars, lines and the bitmap font's text on.
type canvas struct{ img *image.RGBA }

func newCanvas(width, height int) *canvas {
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.White}, image.Point{}, draw.Src)
	return &canvas{img}
}

func (cv *canvas) text(px, py int, s string, c color.Color) {
	d := &font.Drawer{Dst: cv.img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(px, py)}
	d.DrawString(ascii(s))
}

func (cv *canvas) textWidth(s string) int {
	return font.MeasureString(basicfont.Face7x13, ascii(s)).Round()
}

func (cv *canvas) fill(x0, y0, x1, y1 int, c color.Color) {
	draw.Draw(cv.img, image.Rect(x0, y0, x1, y1), &image.Uniform{c}, image.Point{}, draw.Src)
}

// line draws a 2-pixel line from (x0, y0) to (x1, y1).
func (cv *canvas) line(x0, y0, x1, y1 int, c color.Color) {
	steps := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= steps; i++ {
		px, py := x0+(x1-x0)*i/steps, y0+(y1-y0)*i/steps
		cv.fill(px, py, px+2, py+2, c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func (cv *canvas) save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, cv.img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
