package rules

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// CloudControllerVersion is the API version Cloud Controller, the most
// common platform, sends (OSB 2.15): the version a gateway speaks to a
// broker on its own (a catalog fetched at start, refreshed or linted),
// capped at the broker's maximum.
var CloudControllerVersion = v2_15

// Negotiated is the outcome of version negotiation: the version the
// platform speaks and the version the broker is called at.
type Negotiated struct {
	// Platform is the version the platform sent in X-Broker-API-Version.
	Platform osb.Version
	// Broker is the version the broker is called at: Platform, capped at
	// the newest version the broker accepts.
	Broker osb.Version
	// Capped reports that Broker is below Platform: the broker gets its
	// newest version in X-Broker-API-Version, not the platform's value.
	Capped bool
}

// Negotiate reads the X-Broker-API-Version values a platform sent (all of
// them, in order) against the versions a broker accepts, min to max, and
// returns the versions of the call. The header must be one MAJOR.MINOR
// value of min's major version and at least min; above max, it is capped
// at max (the broker gets the newest version it speaks: OSB versions of
// one major are backward compatible).
//
// A missing or empty header gets status missing with no code (412, or 400
// as OSB 2.16 allows: a tenant's choice); every other refusal is 412
// Precondition Failed. Each description names what came and the versions
// the broker (named broker) accepts. Negotiate allocates nothing for a
// version it accepts: it runs on every request.
func Negotiate(vals []string, min, max osb.Version, missing int, broker string) (Negotiated, error) {
	var raw string
	if len(vals) > 0 {
		raw = vals[0]
	}
	if raw == "" {
		return Negotiated{}, osb.Errorf(missing, "",
			"X-Broker-API-Version header is missing; the broker %q accepts %s to %s", broker, min, max)
	}
	if len(vals) > 1 {
		return Negotiated{}, osb.Errorf(http.StatusPreconditionFailed, "",
			"X-Broker-API-Version was sent %d times; expected one MAJOR.MINOR value the broker %q accepts (%s to %s)", len(vals), broker, min, max)
	}
	v, err := osb.ParseVersion(raw)
	if err != nil {
		return Negotiated{}, osb.Errorf(http.StatusPreconditionFailed, "",
			"X-Broker-API-Version %q is not of the form MAJOR.MINOR; the broker %q accepts %s to %s", raw, broker, min, max)
	}
	if v.Major != min.Major {
		return Negotiated{}, osb.Errorf(http.StatusPreconditionFailed, "",
			"X-Broker-API-Version %s has major version %d; the broker %q accepts %s to %s", v, v.Major, broker, min, max)
	}
	if v.Less(min) {
		return Negotiated{}, osb.Errorf(http.StatusPreconditionFailed, "",
			"X-Broker-API-Version %s is below %s, the lowest the broker %q accepts", v, min, broker)
	}
	if max.Less(v) {
		return Negotiated{Platform: v, Broker: max, Capped: true}, nil
	}
	return Negotiated{Platform: v, Broker: v}, nil
}

// RefusesVersion reports whether a broker's answer with status to GET
// /v2/catalog says it refuses the X-Broker-API-Version it was sent: 412
// Precondition Failed, the answer OSB 2.16 gives a version a broker does
// not support (some brokers add the code "IncompatibleAPIVersion"). It is
// that version's answer, not an outage: a platform sending the version
// gets it every time, and a platform sending another is not affected.
func RefusesVersion(status int) bool { return status == http.StatusPreconditionFailed }
