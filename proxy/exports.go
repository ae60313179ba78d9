package proxy

import (
	"context"
	"net/url"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/emulate"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/policies"
	"github.com/osb-gateway/osb-gateway/proxy/internal/routes"
	"github.com/osb-gateway/osb-gateway/proxy/internal/usage"
)

// Usage reports (package usage): instance-hours and bindings per
// tenant, broker, service and plan over a period.

// DefaultUsagePeriod is the period of a UsageQuery without From: the 30
// days before To.
const DefaultUsagePeriod = usage.DefaultUsagePeriod

// MaxUsagePoints bounds the points of LiveInstancesSeries.
const MaxUsagePoints = usage.MaxUsagePoints

// UsageQuery selects a usage report (usage.UsageQuery).
type UsageQuery = usage.UsageQuery

// UsageRow is one tenant, broker, service and plan of a UsageReport.
type UsageRow = usage.UsageRow

// UsageReport is the usage over a period (usage.UsageReport).
type UsageReport = usage.UsageReport

// UsagePoint is one plan's live instances at one time.
type UsagePoint = usage.UsagePoint

// UsageCSVHeader is the first line of UsageReport.WriteCSV.
var UsageCSVHeader = usage.UsageCSVHeader

// BillingHours is what the usage CSV rounds instance_hours to
// (usage.BillingHours).
const BillingHours = usage.BillingHours

// InProgress is the description of the 400 that refuses a second
// operation on an instance while one is in progress.
const InProgress = guard.InProgress

// OrphanTick is how often MitigateOrphans should run (guard.OrphanTick).
const OrphanTick = guard.OrphanTick

// Reconciler is the Who of the background reconciler's polls.
const Reconciler = guard.Reconciler

// ReconcileRequest asks Reconcile to settle one held operation, and
// ReconcileResult is what it did (guard.ReconcileRequest, ReconcileResult).
type (
	ReconcileRequest = guard.ReconcileRequest
	ReconcileResult  = guard.ReconcileResult
)

// Outcomes of a reconcile (ReconcileResult.Outcome).
const (
	OutcomeSettledSucceeded = guard.OutcomeSettledSucceeded
	OutcomeSettledFailed    = guard.OutcomeSettledFailed
	OutcomeGone             = guard.OutcomeGone
	OutcomeInProgress       = guard.OutcomeInProgress
	OutcomeUnreadable       = guard.OutcomeUnreadable
	OutcomeNotEnded         = guard.OutcomeNotEnded
	OutcomePollFailed       = guard.OutcomePollFailed
	OutcomeForcedSucceeded  = guard.OutcomeForcedSucceeded
	OutcomeForcedFailed     = guard.OutcomeForcedFailed
	OutcomeReleased         = guard.OutcomeReleased
	OutcomeSettledMeanwhile = guard.OutcomeSettledMeanwhile
)

// ReportUsage is Gateway.Usage over the store st, with now the time a
// zero q.To stands for: for a command that opens the state store itself.
func ReportUsage(ctx context.Context, st store.Store, q usage.UsageQuery, now time.Time) (usage.UsageReport, error) {
	return usage.ReportUsage(ctx, st, q, now)
}

// ParseUsageQuery reads a UsageQuery from URL query values (see
// usage.ParseUsageQuery).
func ParseUsageQuery(v url.Values) (usage.UsageQuery, error) { return usage.ParseUsageQuery(v) }

// BilledHours rounds hours as the usage CSV does (usage.BilledHours).
func BilledHours(h float64) float64 { return usage.BilledHours(h) }

// Timer starts a timer of d: it returns a channel that receives once d has
// passed, and a func that stops the timer (Options.Timer).
type Timer = core.Timer

// What the emulation stage answered in the broker's place (Scope.Emulated;
// emulate.Emulated*).
const (
	EmulatedFetch  = emulate.EmulatedFetch
	EmulatedReplay = emulate.EmulatedReplay
	EmulatedGone   = emulate.EmulatedGone
	EmulatedShared = emulate.EmulatedShared
	EmulatedShim   = emulate.EmulatedShim
)

// ShimOperationPrefix starts the operation the async shim answers with.
const ShimOperationPrefix = emulate.ShimOperationPrefix

// What a retired broker's calls get (routes.OutcomeRetired,
// routes.EmulatedRetired).
const (
	OutcomeRetired  = routes.OutcomeRetired
	EmulatedRetired = routes.EmulatedRetired
)

// Finding is one OSB rule a request or a broker response broke
// (core.Finding).
type Finding = core.Finding

// PolicyDenial is a call a policy denied (or, in report mode, would
// have), as the console lists it (policies.PolicyDenial).
type PolicyDenial = policies.PolicyDenial

// ProtectionPolicy: a policy (policies:, docs/policies.md) denied the call
// (core's word); OutcomeDenied is its outcome.
const (
	ProtectionPolicy = core.ProtectionPolicy
	OutcomeDenied    = core.OutcomeDenied
)
