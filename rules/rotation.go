package rules

import (
	"fmt"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Binding rotation (OSB 2.17): a bind with predecessor_binding_id creates a
// new binding of the instance that replaces the named one, which the
// platform unbinds afterwards. Only plans that say binding_rotatable in the
// catalog may be rotated.

// checkPredecessorSelf refuses a bind that names itself as its
// predecessor: a rotation creates another binding.
func checkPredecessorSelf(c Call, req *Request, vs *violationList) {
	if c.Endpoint != Bind || req.PredecessorBindingID == "" || req.PredecessorBindingID != c.BindingID {
		return
	}
	vs.add("request.predecessor_binding_id.self", fmt.Sprintf(
		"predecessor_binding_id must name the binding being rotated, not the one this bind creates, got %s, this binding's own id",
		quoteCut(req.PredecessorBindingID)))
}

// CheckRotation checks a rotation against the broker's catalog: a bind
// whose request (as CheckRequest decoded it) has predecessor_binding_id
// needs a plan that is binding_rotatable (rule
// request.catalog.not_rotatable, 400). A broker whose newest version,
// brokerMax, predates rotation gets the bind without the field (the
// predated table's Drop row: the rotation is bridged as an ordinary bind),
// so its catalog's word does not matter, and nothing is checked; nor is
// anything for other calls, without a catalog, or for a plan the catalog
// rules already refused.
//
// Whether the predecessor exists, and under the same instance, is for the
// caller to check against what it knows of the broker's bindings (see
// UnknownPredecessor).
func CheckRotation(c Call, v, brokerMax osb.Version, req *Request, cat CatalogView) []Violation {
	if c.Endpoint != Bind || req == nil || req.PredecessorBindingID == "" || cat == nil {
		return nil
	}
	if f := ForwardingFor(c, v, brokerMax); f.drops&(1<<predatedIndex(PartBody, "predecessor_binding_id")) != 0 {
		return nil
	}
	s, p, err := cat.Plan(req.ServiceID, req.PlanID)
	if err != nil || osb.PlanBindingRotatable(p) {
		return nil
	}
	return []Violation{{Rule: "request.catalog.not_rotatable", Status: http.StatusBadRequest, Description: fmt.Sprintf(
		"a rotation (predecessor_binding_id %s) needs a plan that is binding_rotatable in the broker's catalog, got %s, which is not",
		quoteCut(req.PredecessorBindingID), planName(s, p))}}
}

// UnknownPredecessor is the violation for a rotation whose predecessor the
// caller does not know under the bind's instance (rule
// request.predecessor_binding_id.unknown, 400): a binding that does not
// exist, or one of another instance.
func UnknownPredecessor(c Call, predecessorID string) Violation {
	return Violation{Rule: "request.predecessor_binding_id.unknown", Status: http.StatusBadRequest, Description: fmt.Sprintf(
		"predecessor_binding_id must name an existing binding of instance %s, got %s, which the gateway's inventory of the broker does not hold under that instance",
		quoteCut(c.InstanceID), quoteCut(predecessorID))}
}

// predatedIndex returns the index of the predated table's row of the part
// and key; it panics when there is none (a table edit broke the code).
func predatedIndex(part Part, key string) int {
	for i := range predatedTable {
		if predatedTable[i].Part == part && predatedTable[i].key == key {
			return i
		}
	}
	panic("rules: no predated row " + part.String() + " " + key)
}
