package guard

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// storeError is the answer when the state store fails: 503 naming what
// failed; the store's own error goes to the log only.
func storeError(what string, err error) error {
	return &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
		Description: what + " failed: the state store returned an error; the cause is in the gateway's log"}
}
