package console

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
	"time"
)

// Charts drawn on the server as inline SVG: no script, no CDN, nothing to
// load; they print and work offline. Every label is escaped.

// series is one line of a chart.
type series struct {
	name   string
	points []point
}

type point struct {
	at time.Time
	v  float64
}

// palette are the lines' colours, in order (readable on white and for the
// common colour blindnesses).
var palette = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000"}

const (
	chartW, chartH           = 640, 220
	padL, padR, padT, padB   = 56, 12, 12, 28
	legendLine, maxLegendRow = 16, 8
)

// lineChart draws ss over time with a y axis from 0 to the largest value;
// unit labels the y axis. With no points it says so instead.
func lineChart(title, unit string, ss []series) template.HTML {
	var from, to time.Time
	maxV := 0.0
	n := 0
	for _, s := range ss {
		for _, p := range s.points {
			if n == 0 || p.at.Before(from) {
				from = p.at
			}
			if n == 0 || p.at.After(to) {
				to = p.at
			}
			maxV = math.Max(maxV, p.v)
			n++
		}
	}
	var b strings.Builder
	legend := min(len(ss), maxLegendRow)
	h := chartH + legend*legendLine
	fmt.Fprintf(&b, `<svg class="chart" role="img" aria-label="%s" viewBox="0 0 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg">`,
		esc(title), chartW, h, chartW, h)
	fmt.Fprintf(&b, `<title>%s</title>`, esc(title))
	x0, y0, x1, y1 := padL, padT, chartW-padR, chartH-padB
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#fafafa" stroke="#ccc"/>`, x0, y0, x1-x0, y1-y0)
	if n < 2 || !to.After(from) {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" class="empty">not enough samples yet: the console samples the metrics every few seconds</text></svg>`,
			(x0+x1)/2, (y0+y1)/2)
		return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped text
	}
	top := niceCeil(maxV)
	span := to.Sub(from).Seconds()
	xy := func(p point) (float64, float64) {
		x := float64(x0) + p.at.Sub(from).Seconds()/span*float64(x1-x0)
		y := float64(y1) - p.v/top*float64(y1-y0)
		return x, y
	}
	for i := 0; i <= 4; i++ { // grid and y labels
		v := top * float64(i) / 4
		y := float64(y1) - float64(i)/4*float64(y1-y0)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>`, x0, y, x1, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" class="axis">%s</text>`, x0-4, y+4, esc(short(v)))
	}
	layout := timeLayout(to.Sub(from))
	prev := ""
	for i := 0; i <= timeTicks; i++ { // x labels: dates for days, times for hours
		at := from.Add(time.Duration(float64(to.Sub(from)) * float64(i) / timeTicks))
		x := float64(x0) + float64(i)/timeTicks*float64(x1-x0)
		anchor, label := "middle", at.UTC().Format(layout)
		if label == prev && i < timeTicks {
			continue // a short span: one label per distinct time
		}
		prev = label
		switch i {
		case 0:
			anchor = "start"
		case timeTicks:
			anchor, label = "end", label+" UTC"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ccc"/>`, x, y1, x, y1+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s" class="axis time">%s</text>`, x, chartH-8, anchor, esc(label))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="axis">%s</text>`, x0+4, y0+12, esc(unit))
	for i, s := range ss {
		c := palette[i%len(palette)]
		var pts []string
		for _, p := range s.points {
			x, y := xy(p)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"><title>%s</title></polyline>`,
			c, strings.Join(pts, " "), esc(s.name))
		if i < legend {
			ly := chartH + i*legendLine + 4
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="4" fill="%s"/><text x="%d" y="%d" class="legend">%s</text>`,
				x0, ly+4, c, x0+18, ly+10, esc(s.name))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped text
}

// timeTicks is how many intervals the time axis is cut into (labels at
// both ends and between).
const timeTicks = 4

// timeLayout is how the time axis labels a span: dates for days, dates
// and times within a few days, times of day within one.
func timeLayout(span time.Duration) string {
	switch {
	case span >= 4*24*time.Hour:
		return "2006-01-02"
	case span >= 24*time.Hour:
		return "01-02 15:04"
	case span >= time.Hour:
		return "15:04"
	case span >= 10*time.Second:
		return "15:04:05"
	}
	return "15:04:05.000"
}

// bar is one bar of a bar chart.
type bar struct {
	label string
	v     float64
}

// barChart draws horizontal bars, one per row.
func barChart(title string, bars []bar) template.HTML {
	const rowH, labelW, w = 22, 200, chartW
	h := max(len(bars), 1)*rowH + 8
	maxV := 0.0
	for _, x := range bars {
		maxV = math.Max(maxV, x.v)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" role="img" aria-label="%s" viewBox="0 0 %d %d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg"><title>%s</title>`,
		esc(title), w, h, w, h, esc(title))
	if len(bars) == 0 {
		fmt.Fprintf(&b, `<text x="8" y="16" class="empty">none</text></svg>`)
		return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped text
	}
	for i, x := range bars {
		y := 4 + i*rowH
		bw := 0.0
		if maxV > 0 {
			bw = x.v / maxV * float64(w-labelW-70)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" class="legend">%s</text>`, labelW-6, y+14, esc(x.label))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s</title></rect>`,
			labelW, y+3, bw, rowH-8, palette[0], esc(x.label), esc(short(x.v)))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="axis">%s</text>`, float64(labelW)+bw+6, y+14, esc(short(x.v)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped text
}

func esc(s string) string { return html.EscapeString(s) }

// niceCeil is a round number at or above v (1, 2 or 5 times a power of
// ten), at least 1.
func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// short formats v with at most three significant digits.
func short(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e6:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
