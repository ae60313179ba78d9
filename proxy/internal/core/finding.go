package core

import "github.com/osb-gateway/osb-gateway/rules"

// Finding is one OSB rule a request or a broker response broke.
type Finding struct {
	// Direction is "request" or "response".
	Direction string
	rules.Violation
}
