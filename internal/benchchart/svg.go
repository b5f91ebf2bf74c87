package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/cipherd/cipherd/internal/chartaxis"
)

// Layout, in SVG user units.
const (
	width      = 760
	labelW     = 150 // group labels, left of the bars
	valueW     = 70  // room right of the longest bar for its value
	barH       = 16
	barGap     = 3
	groupGap   = 14
	top        = 58
	legendRowH = 20
)

// palette: one colour per series, distinguishable in print and for the
// common colour-vision deficiencies (Okabe–Ito).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

// writeSVG draws the chart: per group, one bar per series present, with its
// value at the end; a linear axis from zero with round ticks; a legend.
func (c *chart) writeSVG(w io.Writer) error {
	peak := 0.0
	for _, v := range c.values {
		peak = math.Max(peak, v)
	}
	step := chartaxis.NiceStep(peak, 5)
	axisMax := math.Max(step, math.Ceil(peak/step-1e-9)*step)
	plotX0, plotX1 := float64(labelW), float64(width-valueW)
	x := func(v float64) float64 { return plotX0 + v/axisMax*(plotX1-plotX0) }

	var b strings.Builder
	y := float64(top)
	type bar struct {
		y, w   float64
		colour string
		label  string
	}
	var bars []bar
	var groupLabels []struct {
		y    float64
		text string
	}
	for _, g := range c.groups {
		start := y
		for i, s := range c.series {
			v, ok := c.values[[2]string{g, s}]
			if !ok {
				continue
			}
			bars = append(bars, bar{y, x(v) - plotX0, palette[i%len(palette)], formatValue(v)})
			y += barH + barGap
		}
		groupLabels = append(groupLabels, struct {
			y    float64
			text string
		}{(start + y - barGap) / 2, g})
		y += groupGap
	}
	plotY1 := y - groupGap + 6
	legendY := plotY1 + 54
	height := legendY + legendRowH*float64((len(c.series)+2)/3) + 8

	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%g" viewBox="0 0 %d %g" font-family="DejaVu Sans, Verdana, sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<title>%s</title>`+"\n", esc(c.title))
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="12" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", esc(c.title))
	if c.note != "" {
		fmt.Fprintf(&b, `<text x="12" y="40" fill="#555">%s</text>`+"\n", esc(c.note))
	}
	// Grid and axis.
	for v := 0.0; v <= axisMax+step/1e6; v += step {
		px := chartaxis.Round1(x(v))
		fmt.Fprintf(&b, `<line x1="%g" y1="%d" x2="%g" y2="%g" stroke="#ddd"/>`+"\n", px, top-4, px, plotY1)
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" fill="#333">%s</text>`+"\n", px, plotY1+15, formatValue(v))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" fill="#333">%s</text>`+"\n", chartaxis.Round1((plotX0+plotX1)/2), plotY1+30, esc(c.unit))
	for _, gl := range groupLabels {
		fmt.Fprintf(&b, `<text x="%d" y="%g" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n", labelW-8, chartaxis.Round1(gl.y), esc(gl.text))
	}
	for _, br := range bars {
		fmt.Fprintf(&b, `<rect class="bar" x="%g" y="%g" width="%g" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
			plotX0, chartaxis.Round1(br.y), chartaxis.Round1(br.w), barH, br.colour, esc(br.label+" "+c.unit))
		fmt.Fprintf(&b, `<text x="%g" y="%g" dominant-baseline="middle" fill="#222">%s</text>`+"\n", chartaxis.Round1(plotX0+br.w+4), chartaxis.Round1(br.y+barH/2), br.label)
	}
	fmt.Fprintf(&b, `<line x1="%g" y1="%d" x2="%g" y2="%g" stroke="#333"/>`+"\n", plotX0, top-4, plotX0, plotY1)
	// Legend, three per row.
	for i, s := range c.series {
		lx := 12 + float64(i%3)*250
		ly := legendY + legendRowH*float64(i/3)
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="14" height="12" fill="%s"/><text x="%g" y="%g">%s</text>`+"\n",
			lx, ly-10, palette[i%len(palette)], lx+20, ly, esc(s))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func formatValue(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	case v >= 10:
		return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

func esc(s string) string { return html.EscapeString(s) }
