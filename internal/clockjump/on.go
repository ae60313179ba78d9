//go:build campaign_clock

package clockjump

import (
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// On is true: Wall is moved by the offset in the file EnvFile names.
const On = true

var offset atomic.Int64 // nanoseconds

// Wall is time.Now moved by the offset in force. Like a stepped machine
// clock, the step moves the wall reading and the monotonic one alike
// only as Go's time.Now does: Add moves both, so a duration measured
// across a step with Wall includes the step (a step the machine takes
// leaves Go's monotonic readings alone: bolt's locks live their time on
// the monotonic clock, see store.Steady, and replicas sharing a store run
// on its server's clock carried by the monotonic one, store.ServerClock).
func Wall() time.Time {
	t := time.Now()
	if d := offset.Load(); d != 0 {
		return t.Add(time.Duration(d))
	}
	return t
}

func init() {
	path := os.Getenv(EnvFile)
	if path == "" {
		return
	}
	last := load(path, "")
	go func() {
		for {
			time.Sleep(20 * time.Millisecond)
			last = load(path, last)
		}
	}()
}

// load reads the offset file and, when it says something other than last,
// puts the offset in force and acknowledges it; it returns what it read.
func load(path, last string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return last
	}
	s := strings.TrimSpace(string(raw))
	if s == last {
		return last
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return last
	}
	offset.Store(int64(d))
	tmp := path + ".ack.tmp"
	if os.WriteFile(tmp, []byte(s+"\n"), 0o600) == nil {
		_ = os.Rename(tmp, path+".ack")
	}
	return s
}
