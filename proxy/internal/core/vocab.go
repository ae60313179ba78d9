package core

// The words the stages and the services share to say what happened to a
// call: on the Scope, in logs, in metrics' labels and audit records.

// How the poll shield answered a last_operation poll (Scope.Shield).
const (
	ShieldForwarded = "forwarded" // the poll's own broker call
	ShieldShared    = "shared"    // the answer of another poll's broker call in flight
	ShieldReused    = "reused"    // an "in progress" answer within brokers[].poll.min_interval
)

// What the gateway did with a call that needed the broker's catalog when
// none could be had, as Scope.CatalogUnavailable and the
// osb_gateway_catalog_unavailable_total metric name it.
const (
	// CatalogRefused: the call got 503 and was not forwarded.
	CatalogRefused = "refused"
	// CatalogForwarded: the call was forwarded without the catalog checks
	// (brokers[].validation.without_catalog: forward).
	CatalogForwarded = "forwarded"
)

// CallClass is what the protections count a call as: a read or a
// mutating call. They refuse a mutating call with 429, never a 5xx: by
// Cloud Controller's orphan-mitigation record, a 5xx to a provision or
// bind sets off a DELETE, and nothing was created by a call the broker
// never saw.
type CallClass uint8

// The call classes; NumCallClasses (route.go) counts them.
const (
	ClassReads CallClass = iota
	ClassMutations
)

// CallClassNames label the metrics and name the config keys
// (limits.reads, limits.mutations).
var CallClassNames = [NumCallClasses]string{"reads", "mutations"}

// Results of one mitigation (the orphan mitigation), for logs and the admin API.
const (
	Mitigated       = "mitigated"         // the broker undid it (200 or 410, or a poll of its 202 that says it succeeded)
	MitigationFail  = "failed"            // the broker did not; rescheduled or given up
	MitigationBusy  = "busy"              // another operation holds the instance; tried when the claim lapses
	MitigationTaken = "claimed"           // another gateway replica is carrying it out
	MitigationGone  = "cancelled"         // nothing left to undo (a later success cancelled it)
	MitigationDown  = "state unavailable" // the store did not answer; the next tick tries again
	MitigationAsync = "deleting"          // the broker deletes it asynchronously (202); the next attempt polls it
)

// ProtectionPolicy is Scope.Protection of a call a policy (policies:,
// docs/policies.md) denied; OutcomeDenied is its outcome.
const (
	ProtectionPolicy = "policy"
	OutcomeDenied    = "denied"
)

// The rule ids of the findings the policy stage records. A policy
// finding's Code holds the policy's name and, for a change, its
// Description the parameter; the audit record reads them.
const (
	RulePolicyDenied    = "policy.denied"    // a policy denied the call
	RulePolicyReported  = "policy.reported"  // a policy in report mode would have denied it
	RulePolicyForced    = "policy.forced"    // a policy forced a parameter
	RulePolicyDefaulted = "policy.defaulted" // a policy defaulted a parameter
)
