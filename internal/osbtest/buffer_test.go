package osbtest

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// TestBuffer writes from many goroutines while reading; run with -race.
func TestBuffer(t *testing.T) {
	var b Buffer
	log := slog.New(slog.NewTextHandler(&b, nil))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				log.Info("line", "writer", i, "n", j)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for _, want := range []string{"writer=0 n=0", "writer=7 n=49"} {
		if !strings.Contains(b.String(), fmt.Sprintf("msg=line %s\n", want)) {
			t.Errorf("no whole line with %q", want)
		}
	}
}
