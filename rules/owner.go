package rules

import (
	"fmt"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// A service instance belongs to the tenant whose platform created it. On a
// broker several tenants reach, a call of one tenant on another tenant's
// instance (or on a binding of it) gets the answer a broker gives for an
// instance it does not hold, without reaching the broker: the gateway
// answers as if the instance did not exist for the caller.

// notOwnedRow is the answer to one endpoint's call on another tenant's
// instance: status from the version since on, before (0: status at every
// version) for older platforms, which the specification gave no "not
// found" for that call.
type notOwnedRow struct {
	status int
	since  osb.Version
	before int
	what   string // how the description names the refusal
}

// notOwnedTable holds a row for each endpoint that names an instance:
//
//   - GET instance and GET binding: 404 Not Found, the specification's
//     answer for what does not exist (OSB 2.14, which brought them);
//   - deprovision and unbind: 410 Gone, the specification's answer for a
//     deletion of what does not exist (every version); the platform takes it
//     as done and forgets its own record, which holds nothing of the owner's;
//   - last_operation (instance and binding): 410 Gone, the one answer for an
//     operation the broker no longer knows that every version defines;
//   - update and bind: 404 Not Found from OSB 2.14 (the version that defines
//     "not found" for an instance), 400 Bad Request before it (the only
//     client error those versions give both calls); either is a failure
//     to the platform, never one that sets off orphan mitigation;
//   - provision: 409 Conflict, a broker's answer to an instance id already
//     in use with other attributes: the id is taken, and the platform must
//     choose another.
var notOwnedTable = [...]notOwnedRow{
	Provision:             {status: http.StatusConflict, what: "provision"},
	Update:                {status: http.StatusNotFound, since: v2_14, before: http.StatusBadRequest, what: "update"},
	Deprovision:           {status: http.StatusGone, what: "deprovision"},
	GetInstance:           {status: http.StatusNotFound, what: "fetch"},
	InstanceLastOperation: {status: http.StatusGone, what: "poll"},
	Bind:                  {status: http.StatusNotFound, since: v2_14, before: http.StatusBadRequest, what: "bind"},
	Unbind:                {status: http.StatusGone, what: "unbind"},
	GetBinding:            {status: http.StatusNotFound, what: "fetch"},
	BindingLastOperation:  {status: http.StatusGone, what: "poll"},
}

// NotOwned is the answer to c, a call of tenant on an instance of broker
// that another tenant owns, for a platform at version v. Its description
// names the caller's tenant, never the owner: a tenant learns nothing of
// another but, for a provision, that the id is taken (as the broker's own
// 409 would tell). It panics for an endpoint that names no instance (a
// bug: the catalog has no owner).
func NotOwned(c Call, v osb.Version, tenant, broker string) *osb.Error {
	row := notOwnedTable[c.Endpoint]
	status := row.status
	if row.before != 0 && v.Less(row.since) {
		status = row.before
	}
	var desc string
	switch {
	case row.status == 0:
		panic(fmt.Sprintf("rules.NotOwned: %v names no instance", c.Endpoint))
	case c.Endpoint == Provision:
		desc = fmt.Sprintf("service instance id %q is already in use at broker %q; provision with another id", c.InstanceID, broker)
	case c.BindingID != "":
		desc = fmt.Sprintf("tenant %q holds no service instance %q (binding %q) at broker %q; the %s was not sent to the broker",
			tenant, c.InstanceID, c.BindingID, broker, row.what)
	default:
		desc = fmt.Sprintf("tenant %q holds no service instance %q at broker %q; the %s was not sent to the broker",
			tenant, c.InstanceID, broker, row.what)
	}
	return &osb.Error{Status: status, Description: desc}
}
