package console

import (
	"strings"
	"testing"
	"time"
)

func TestLineChartEscapesLabels(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svg := string(lineChart(`<script>alert(1)</script>`, "u", []series{{name: `b"><script>x</script>`,
		points: []point{{t0, 1}, {t0.Add(time.Minute), 3}}}}))
	if strings.Contains(svg, "<script>") {
		t.Fatalf("a label reached the SVG unescaped:\n%s", svg)
	}
	if !strings.Contains(svg, "<polyline") || !strings.Contains(svg, "&lt;script&gt;") {
		t.Fatalf("the chart lacks its line or its escaped title:\n%s", svg)
	}
}

func TestLineChartWithoutSamples(t *testing.T) {
	svg := string(lineChart("t", "u", nil))
	if strings.Contains(svg, "<polyline") || !strings.Contains(svg, "not enough samples") {
		t.Fatalf("an empty chart:\n%s", svg)
	}
}

func TestNiceCeil(t *testing.T) {
	for v, want := range map[float64]float64{0: 1, 0.3: 1, 1: 1, 1.2: 2, 3: 5, 7: 10, 10: 10, 11: 20, 230: 500, 999: 1000} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}

// rates are per second between samples; a counter that went down (its
// process restarted) counts from zero.
func TestRates(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	samples := []sample{
		{at: t0, requests: map[string]float64{"a": 10}},
		{at: t0.Add(10 * time.Second), requests: map[string]float64{"a": 30, "b": 5}},
		{at: t0.Add(20 * time.Second), requests: map[string]float64{"a": 4, "b": 5}},
	}
	ss := rates(samples, func(s sample) map[string]float64 { return s.requests })
	got := map[string][]float64{}
	for _, s := range ss {
		for _, p := range s.points {
			got[s.name] = append(got[s.name], p.v)
		}
	}
	if a := got["a"]; len(a) != 2 || a[0] != 2 || a[1] != 0.4 {
		t.Errorf("broker a's rates = %v, want [2 0.4]", a)
	}
	if b := got["b"]; len(b) != 2 || b[0] != 0.5 || b[1] != 0 {
		t.Errorf("broker b's rates = %v, want [0.5 0]", b)
	}
}

func TestRecentRefusals(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	kind := refusalKinds[0].kind
	at := func(d time.Duration, n float64) sample {
		return sample{at: t0.Add(d), refusals: map[string]map[string]float64{kind: {"b": n}}, errors5xx: map[string]float64{}}
	}
	// Only the window's increase counts: 3 before it, 4 within.
	samples := []sample{at(0, 0), at(5*time.Minute, 3), at(10*time.Minute, 3), at(24*time.Minute, 7)}
	rows := recentRefusals(samples, t0.Add(25*time.Minute))
	if len(rows) != 1 || rows[0].Count != 4 || rows[0].Broker != "b" || rows[0].Kind != kind {
		t.Fatalf("recent refusals = %+v, want 4 of %q at b", rows, kind)
	}
}

func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{"/ui/operations?x=1": "/ui/operations?x=1", "": "/", "//evil.example": "/",
		"https://evil.example/": "/", "/\\evil": "/", "/a\r\nb": "/"} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
	for _, next := range offListener {
		if got := safeNext(next); got != "/" {
			t.Errorf("safeNext(%q) = %q, want /", next, got)
		}
	}
	for _, next := range onListener {
		if got := safeNext(next); got != next {
			t.Errorf("safeNext(%q) = %q, want it kept", next, got)
		}
	}
}

// The usage chart over 30 days labelled both ends with the time of day
// ("21:22:30 … 21:22:30"), so it read as a flat line: labels fit the
// period, dates for days, times for hours.
func TestLineChartTimeLabelsFitThePeriod(t *testing.T) {
	t0 := time.Date(2026, 10, 30, 21, 22, 30, 0, time.UTC)
	for _, c := range []struct {
		name       string
		span       time.Duration
		first, end string
	}{
		{"30 days", 30 * 24 * time.Hour, ">2026-10-30<", ">2026-11-29 UTC<"},
		{"2 days", 48 * time.Hour, ">10-30 21:22<", ">11-01 21:22 UTC<"},
		{"6 hours", 6 * time.Hour, ">21:22<", ">03:22 UTC<"},
		{"10 minutes", 10 * time.Minute, ">21:22:30<", ">21:32:30 UTC<"},
	} {
		svg := string(lineChart("t", "u", []series{{name: "s", points: []point{{t0, 1}, {t0.Add(c.span), 2}}}}))
		if !strings.Contains(svg, c.first) || !strings.Contains(svg, c.end) {
			t.Errorf("%s: the time axis lacks %s … %s:\n%s", c.name, c.first, c.end, svg)
		}
		if n := strings.Count(svg, `class="axis time"`); n != timeTicks+1 {
			t.Errorf("%s: %d time labels, want %d", c.name, n, timeTicks+1)
		}
	}
}
