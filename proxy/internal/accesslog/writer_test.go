package accesslog

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// TestAccessTimeMatchesAppendFormat: the cached per-second stamp formats
// every instant as time.AppendFormat does, across seconds, zones and
// years.
func TestAccessTimeMatchesAppendFormat(t *testing.T) {
	a := New(io.Discard, "json", nil)
	zones := []*time.Location{time.UTC, time.FixedZone("x", -(3*3600 + 30*60)), time.FixedZone("y", 5*3600+45*60)}
	base := time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC)
	for i := range 5000 {
		tm := base.Add(time.Duration(i) * 997 * time.Microsecond).In(zones[i/7%len(zones)])
		got := string(a.appendTime(nil, tm))
		if want := tm.Format(accessTimeFormat); got != want {
			t.Fatalf("%v: got %s, want %s", tm, got, want)
		}
	}
}

// TestBufferedAccessLog: buffered lines are written whole, in order, in
// far fewer writes than lines; within the interval; and Close writes the
// rest.
func TestBufferedAccessLog(t *testing.T) {
	var out osbtest.Buffer
	a := New(&out, "json", slog.LevelInfo)
	a.Buffer(20 * time.Millisecond)
	line := func(g, i int) []Field {
		return []Field{{Key: "g", Num: int64(g), IsN: true}, {Key: "i", Num: int64(i), IsN: true}}
	}
	a.Write(time.Now(), slog.LevelInfo, line(0, 0))
	deadline := time.Now().Add(5 * time.Second)
	for text, _ := out.Snapshot(); !strings.Contains(text, `"i":0`); text, _ = out.Snapshot() {
		if time.Now().After(deadline) {
			t.Fatal("a buffered line was not written within the flush interval")
		}
		time.Sleep(2 * time.Millisecond)
	}
	const goroutines, perG = 4, 2000 // ~100 bytes a line: several buffers full
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				a.Write(time.Now(), slog.LevelInfo, line(g+1, i))
			}
		})
	}
	wg.Wait()
	a.Close()
	text, writes := out.Snapshot()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != 1+goroutines*perG {
		t.Fatalf("%d lines, want %d", len(lines), 1+goroutines*perG)
	}
	next := make([]int, goroutines+1)
	for _, l := range lines[1:] {
		var rec struct{ G, I int }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("not a whole line: %q: %v", l, err)
		}
		if rec.I != next[rec.G] {
			t.Fatalf("goroutine %d: line %d came where %d was due", rec.G, rec.I, next[rec.G])
		}
		next[rec.G]++
	}
	if writes > len(lines)/10 {
		t.Errorf("%d writes for %d lines: not buffered", writes, len(lines))
	}
	a.Write(time.Now(), slog.LevelInfo, line(9, 9)) // after Close: written at once
	if text, _ := out.Snapshot(); !strings.HasSuffix(text, "\"i\":9}\n") {
		t.Error("a line after Close was not written")
	}
}

// TestBufferedAccessLogIdle: an idle buffered Writer runs no timer; a
// line arms one flush, which writes it, and the log is idle again after.
func TestBufferedAccessLogIdle(t *testing.T) {
	var out osbtest.Buffer
	a := New(&out, "json", slog.LevelInfo)
	a.Buffer(time.Millisecond)
	defer a.Close()
	time.Sleep(20 * time.Millisecond) // twenty intervals without a line
	if n := a.ticks.Load(); n != 0 {
		t.Fatalf("%d flushes ran without a line", n)
	}
	a.Write(time.Now(), slog.LevelInfo, []Field{{Key: "i", Num: 1, IsN: true}})
	deadline := time.Now().Add(5 * time.Second)
	for text, _ := out.Snapshot(); !strings.Contains(text, `"i":1`); text, _ = out.Snapshot() {
		if time.Now().After(deadline) {
			t.Fatal("the line was not written within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // idle again
	if n := a.ticks.Load(); n != 1 {
		t.Fatalf("%d flushes ran for one line, want 1", n)
	}
	if _, writes := out.Snapshot(); writes != 1 {
		t.Fatalf("%d writes for one line, want 1", writes)
	}
}
