package core

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/rules"
)

// StatusClientClosed is recorded (never sent) when the platform closed the
// connection before the broker answered.
const StatusClientClosed = 499

// ResponseRefused is returned by the upstream's ModifyResponse when a
// broker response breaks the OSB rules and the broker's responses are
// enforced.
type ResponseRefused struct {
	Broker     string
	Call       rules.Call
	Status     int
	Violations []rules.Violation
}

// Error names the broker, the call, the status and the rules broken.
func (e *ResponseRefused) Error() string {
	ids := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		ids[i] = v.Rule
	}
	return fmt.Sprintf("broker %q answered %s with status %d, which breaks the OSB rules (%s): %s",
		e.Broker, e.Call.Endpoint, e.Status, strings.Join(ids, ", "), rules.Reject(e.Violations).Description)
}

// AsOSBError is the 502 the platform gets instead of the invalid answer.
func (e *ResponseRefused) AsOSBError() *osb.Error {
	return &osb.Error{Status: http.StatusBadGateway, Description: e.Error(), Err: e}
}

// NoToken is a broker call's failure for the gateway's own credentials to
// the broker (the upstream's outbound auth): NoToken reports that no
// OAuth2 token could be had, so the broker was not called.
type NoToken interface {
	error
	NoToken() bool
}
