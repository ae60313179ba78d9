package store

import (
	"sync"
	"time"
)

// Steady keeps the locks one process wrote on time through a step of the
// wall clock (an NTP step, an operator's date, a VM's clock set on
// resume). A lock's Deadline is a wall-clock time, and the store compares
// it with the store's clock: a step forward would expire at once the lock
// of a call still at the broker, and the sweep or another call would take
// it (the fault campaign's clock-jump on bolt); a step back would keep a
// lock the step longer than its time.
//
// Steady remembers, for each lock this process wrote (or found at its
// start) with a clock that carries Go's monotonic reading (time.Now does;
// a fake clock does not), when it started and when its time runs out on
// the monotonic clock, which no step moves, and that decides: such a lock
// expires when its time is up, whatever the wall clock says meanwhile,
// and is shown with the Started and Deadline the monotonic clock gives. A
// lock written by another replica has only its Deadline, and a clock that
// differs from the writer's still moves it; one found at the start has
// what the clock said then (docs/faults.md).
//
// A backend calls Wrote after a write of a lock took (and for each lock
// it finds when it opens), Gone after its delete, Expired and Shown where
// it judges or returns a lock, and Due where it looks for what expired.
// The zero value is ready; it is safe for concurrent use.
type Steady struct {
	mu  sync.Mutex
	due map[string]steadyDue // by Lock.Key
}

type steadyDue struct {
	owner   string
	at      time.Time // the Deadline on the monotonic clock
	started time.Time // Started on the monotonic clock
}

// Wrote notes that l was written at now, the store's clock when it was
// prepared (PrepareLock). Without a monotonic reading in now (a fake
// clock) it keeps nothing of l's key.
func (s *Steady) Wrote(l Lock, now time.Time) {
	if now == now.Round(0) {
		s.Gone(l.Key, "")
		return
	}
	mono := time.Now()
	d := steadyDue{owner: l.Owner, at: mono.Add(l.Deadline.Sub(now)), started: mono.Add(l.Started.Sub(now))}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.due == nil {
		s.due = map[string]steadyDue{}
	}
	s.due[l.Key] = d
}

// Gone forgets the lock key of owner ("": of any owner), deleted.
func (s *Steady) Gone(key, owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.due[key]; ok && (owner == "" || d.owner == owner) {
		delete(s.due, key)
	}
}

func (s *Steady) of(l Lock) (steadyDue, bool) {
	s.mu.Lock()
	d, ok := s.due[l.Key]
	s.mu.Unlock()
	return d, ok && d.owner == l.Owner
}

// Expired reports whether l has expired at now: its time on the monotonic
// clock is up, when this process wrote it; else its Deadline has passed
// (the package's Expired).
func (s *Steady) Expired(l Lock, now time.Time) bool {
	_, expired := s.Judge(l, now)
	return expired
}

// Judge is Shown and Expired at once, with one look-up.
func (s *Steady) Judge(l Lock, now time.Time) (shown Lock, expired bool) {
	d, mine := s.of(l)
	if !mine {
		return l, Expired(l.Deadline, now)
	}
	mono := time.Now()
	return d.shown(l, now, mono), !d.at.After(mono)
}

// Shown is l as a reader at now sees it: when its Deadline and the time
// it has left on the monotonic clock disagree by more than a second (the
// wall clock stepped since it was written), it gets the Started and
// Deadline the monotonic clock gives at now, so that a caller comparing
// them with its clock (the sweep, the reconciler's age of an operation)
// agrees with Expired.
func (s *Steady) Shown(l Lock, now time.Time) Lock {
	d, mine := s.of(l)
	if !mine {
		return l
	}
	return d.shown(l, now, time.Now())
}

// shown is Shown of l, whose due d is, at now and mono (time.Now).
func (d steadyDue) shown(l Lock, now, mono time.Time) Lock {
	wall := now.Round(0)
	left := d.at.Sub(mono)
	want := wall.Add(left)
	if off := l.Deadline.Sub(want); off > time.Second || off < -time.Second {
		l.Deadline = want.Truncate(time.Microsecond)
		if left > 0 && !l.Deadline.After(now) {
			l.Deadline = l.Deadline.Add(time.Microsecond)
		}
		l.Started = wall.Add(d.started.Sub(mono)).Truncate(time.Microsecond)
	}
	return l
}

// Due is the keys of the locks this process wrote whose time on the
// monotonic clock is up, whatever their Deadline says.
func (s *Steady) Due() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, d := range s.due {
		if time.Until(d.at) <= 0 {
			out = append(out, k)
		}
	}
	return out
}
