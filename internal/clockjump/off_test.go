//go:build !campaign_clock

package clockjump

import (
	"testing"
	"time"
)

// TestNoOffsetByDefault: the real build reads the machine's clock as it
// is, whatever the environment says.
func TestNoOffsetByDefault(t *testing.T) {
	t.Setenv(EnvFile, "/nonexistent")
	if On {
		t.Fatal("On is true without the tag")
	}
	before := time.Now()
	if w := Wall(); w.Before(before) || w.Sub(before) > time.Second {
		t.Errorf("Wall = %s, time.Now was %s", w, before)
	}
}
