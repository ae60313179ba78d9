package rules

import (
	"fmt"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// failureField is a field that describes a failed operation (OSB 2.16): a
// boolean the broker may send in its error answer to the operation, or in
// a last_operation answer that reports the operation failed. It "MUST NOT
// be present for errors of other operations".
type failureField struct {
	name string
	of   endpointSet // the operations whose failure it may describe
	ofIs string      // the same, for descriptions
}

// failureFields are instance_usable (whether the instance can still be
// used after a failed update or deprovision) and update_repeatable
// (whether a failed update may succeed if repeated). Both default to true.
var failureFields = [...]failureField{
	{name: "instance_usable", of: endpointsOf(Update, Deprovision), ofIs: "an update or a deprovision"},
	{name: "update_repeatable", of: endpointsOf(Update), ofIs: "an update"},
}

// failureFieldsSince is the version that brought the failure fields.
var failureFieldsSince = v2_16

// checkFailureFields checks the failure fields of an answer at version
// v: each must be a boolean (rule response.<field>.type) and, when the
// answer reports the failure of operation failed, one that it may describe
// (response.<field>.operation). failed is Unknown when the answer reports
// no failure (a last_operation in progress or succeeded) or the gateway
// does not know which operation failed; then only the type is checked.
// where names the answer for descriptions.
func checkFailureFields(v osb.Version, body []byte, fields jsonfast.Object, failed Endpoint, where string, vs *violationList) {
	if v.Less(failureFieldsSince) {
		return
	}
	for i := range failureFields {
		f := &failureFields[i]
		raw, ok := fields.Get(body, f.name)
		if !ok || isNull(raw) {
			continue
		}
		if typeOf(raw) != typeBool {
			vs.addResponse(ruleID("response", f.name, "type"), fmt.Sprintf("%s in %s must be a boolean (true or false), got %s",
				f.name, where, valueKindOf(raw)))
			continue
		}
		if failed != Unknown && !f.of.has(failed) {
			vs.addResponse(ruleID("response", f.name, "operation"), fmt.Sprintf(
				"%s may describe only the failure of %s (OSB 2.16: it must not be present for errors of other operations), got it in %s, %s",
				f.name, f.ofIs, where, failureWords(failed)))
		}
	}
}

// failureWords names the failure of operation e for a description: "the
// failure of a provision", or "an error of GET catalog" for an endpoint
// that is no operation.
func failureWords(e Endpoint) string {
	switch e {
	case Provision, Deprovision, Bind:
		return "the failure of a " + e.String()
	case Update, Unbind:
		return "the failure of an " + e.String()
	}
	return "an error of " + e.describe()
}

// polledFailure returns the operation a last_operation answer reports
// failed: the polled one when its state is "failed", else Unknown.
func polledFailure(state string, polled Endpoint) Endpoint {
	if state != PollFailed {
		return Unknown
	}
	return polled
}
