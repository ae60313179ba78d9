package store

import (
	"sync"
	"time"
)

// Steady keeps a lock alive through a step of the wall clock (an NTP
// step, an operator's date, a VM's clock set on resume) in the process
// that wrote it. A lock's Deadline is a wall-clock time, and the store
// compares it with the store's clock: a step forward of that clock would
// expire, at once, the lock of a call still at the broker, and the sweep
// or another call would take it (the fault campaign's clock-jump on bolt).
// Steady remembers, for each lock this process wrote with a clock that
// carries Go's monotonic reading (time.Now does; a fake clock does not),
// when its time runs out on the monotonic clock, which no step moves. A
// lock is then expired only when its Deadline has passed at now and, if
// this process wrote it, its time by the monotonic clock has run out too.
// A step back delays expiry by up to the step, never lets a call through
// early. A lock written by another process (before a restart, or by
// another replica) has only its Deadline.
//
// A backend calls Wrote after a write of a lock took, Gone after its
// delete, and Expired and Shown where it judges or returns a lock. The
// zero value is ready; it is safe for concurrent use.
type Steady struct {
	mu  sync.Mutex
	due map[string]steadyDue // by Lock.Key
}

type steadyDue struct {
	owner string
	at    time.Time // on the monotonic clock
}

// Wrote notes that l was written at now, the store's clock when it was
// prepared (PrepareLock). Without a monotonic reading in now (a fake
// clock) it notes nothing.
func (s *Steady) Wrote(l Lock, now time.Time) {
	if now == now.Round(0) {
		s.Gone(l.Key, "")
		return
	}
	at := time.Now().Add(l.Deadline.Sub(now))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.due == nil {
		s.due = map[string]steadyDue{}
	}
	s.due[l.Key] = steadyDue{owner: l.Owner, at: at}
}

// Gone forgets the lock key of owner ("": of any owner), deleted.
func (s *Steady) Gone(key, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.due[key]; ok && (owner == "" || d.owner == owner) {
		delete(s.due, key)
	}
}

// left is how long l has to live by the monotonic clock, when this
// process wrote it and it has some left.
func (s *Steady) left(l Lock) (time.Duration, bool) {
	s.mu.Lock()
	d, ok := s.due[l.Key]
	s.mu.Unlock()
	if !ok || d.owner != l.Owner {
		return 0, false
	}
	left := time.Until(d.at)
	return left, left > 0
}

// Expired reports whether l has expired at now: its Deadline has passed
// (the package's Expired) and no time is left to it on the monotonic
// clock of the process that wrote it.
func (s *Steady) Expired(l Lock, now time.Time) bool {
	if !Expired(l.Deadline, now) {
		return false
	}
	_, live := s.left(l)
	return !live
}

// Shown is l as a reader at now sees it: a lock whose Deadline passed
// while its time on the monotonic clock has not (the clock stepped
// forward) gets the Deadline that time gives at now, so that a caller
// that compares Deadline with its clock agrees it is live.
func (s *Steady) Shown(l Lock, now time.Time) Lock {
	if !Expired(l.Deadline, now) {
		return l
	}
	if left, live := s.left(l); live {
		l.Deadline = now.Round(0).Truncate(time.Microsecond).Add(left.Truncate(time.Microsecond) + time.Microsecond)
	}
	return l
}
