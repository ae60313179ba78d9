package proxy

import (
	"context"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/quota"
)

// The gateway's own actions on operations, orphans, quotas and usage are
// the guard's (guard.go and the files beside it); the Gateway hands them
// on.

// SweepOperations releases the async operations past their deadlines,
// records the orphans they leave and purges the usage records past
// inventory.usage_retention (PurgeUsage); call it periodically (every
// state.SweepTick()). Replicas sharing a store may all call it.
func (g *Gateway) SweepOperations(ctx context.Context) { g.guard.SweepOperations(ctx) }

// MitigateOrphans carries out every due orphan once. Call it every
// OrphanTick; replicas sharing a store may all call it.
func (g *Gateway) MitigateOrphans(ctx context.Context) { g.guard.MitigateOrphans(ctx) }

// QuotaWarnings are the quotas that no plan of their brokers' catalogs
// matches; osb-gateway check prints them.
func (g *Gateway) QuotaWarnings(ctx context.Context) []string { return quota.Warnings(ctx, g.guard) }

// Reconcile settles one held operation by asking its broker (see
// guard.Reconcile for the answers).
func (g *Gateway) Reconcile(ctx context.Context, req guard.ReconcileRequest) (guard.ReconcileResult, error) {
	return g.guard.Reconcile(ctx, req)
}

// ReleaseOperation releases an operation's lock on an operator's word,
// without asking the broker (see guard.ReleaseOperation).
func (g *Gateway) ReleaseOperation(ctx context.Context, broker, instance, binding, who, reason string) error {
	return g.guard.ReleaseOperation(ctx, broker, instance, binding, who, reason)
}

// Usage reports the usage of q's brokers and tenants (see guard.Usage).
func (g *Gateway) Usage(ctx context.Context, q UsageQuery) (UsageReport, error) {
	return g.guard.Usage(ctx, q)
}

// LiveInstancesSeries is the number of live instances at each step of q
// (see guard.LiveInstancesSeries).
func (g *Gateway) LiveInstancesSeries(ctx context.Context, q UsageQuery, step time.Duration) ([]UsagePoint, error) {
	return g.guard.LiveInstancesSeries(ctx, q, step)
}

// PurgeUsage deletes the usage records past inventory.usage_retention and
// returns how many (see guard.PurgeUsage).
func (g *Gateway) PurgeUsage(ctx context.Context) (int, error) { return g.guard.PurgeUsage(ctx) }
