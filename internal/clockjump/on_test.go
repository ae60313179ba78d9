//go:build campaign_clock

package clockjump

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOffset: with the tag, the offset file moves Wall, and each change is
// acknowledged with the offset in force.
func TestOffset(t *testing.T) {
	if !On {
		t.Fatal("On is false under the tag")
	}
	path := filepath.Join(t.TempDir(), "clock")
	for _, c := range []struct {
		write string
		want  time.Duration
	}{{"90s", 90 * time.Second}, {"-10m0s", -10 * time.Minute}, {"0s", 0}} {
		if err := os.WriteFile(path, []byte(c.write+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		load(path, "")
		if off := Wall().Sub(time.Now()); off < c.want-time.Second || off > c.want+time.Second {
			t.Errorf("after %q, Wall is %s off time.Now, want %s", c.write, off, c.want)
		}
		if ack, err := os.ReadFile(path + ".ack"); err != nil || strings.TrimSpace(string(ack)) != c.write {
			t.Errorf("after %q, the ack says %q (%v)", c.write, ack, err)
		}
	}
	if got := load(path, "0s"); got != "0s" {
		t.Errorf("load of an unchanged file = %q, want the last read", got)
	}
}
