package core

import "net/http"

// Gate is the in-flight gate (listen.max_in_flight) as the stages that
// wait inside it see it: a call that waits for something bounded on its
// own (a bcrypt check) Leaves the count, and Rejoins it before it goes on;
// a call that finds no room on rejoining is Shed, not served.
type Gate interface {
	// Leave takes a call the gate admitted out of the count.
	Leave()
	// Rejoin counts a call that left back in and reports whether there
	// was room for it; it is counted either way.
	Rejoin() bool
	// Shed answers a call the gate has no room for.
	Shed(w http.ResponseWriter, r *http.Request, s *Scope)
}
