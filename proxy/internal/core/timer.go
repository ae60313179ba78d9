package core

import "time"

// Timer starts a timer of d: it returns a channel that receives once d has
// passed, and a func that stops the timer (Options.Timer).
type Timer func(d time.Duration) (fired <-chan time.Time, stop func() bool)

// RealTimer is the Timer of time.NewTimer.
func RealTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}
