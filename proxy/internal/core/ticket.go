package core

import "sync/atomic"

// Ticket is what one call holds of its broker's protection from the moment
// the protection let it through: a slot of the broker's queue and a
// breaker permit. The broker call stage ends it once, when the call is
// over (Claimed).
type Ticket struct {
	// Of is the protection that issued the ticket (its owner's type).
	Of any
	// Slot is set when the ticket holds a slot of the broker's queue.
	Slot bool
	// Done reports the breaker permit's outcome; nil: no permit.
	Done func(bool)
	// Claimed is set by whoever ends the ticket.
	Claimed atomic.Bool
}
