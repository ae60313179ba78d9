package main

import (
	"time"

	"github.com/osb-gateway/osb-gateway/internal/clockjump"
)

// gatewayClock is the clock of the serving gateway: the state store's
// (which decides when a lock has expired) and the request path's (which
// sets the deadlines), one clock for both.
var gatewayClock func() time.Time = clockjump.Wall
