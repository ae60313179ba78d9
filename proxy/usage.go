package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
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

// Usage returns the usage report of q: per tenant, broker, service and
// plan, the instance-hours, instances and live instances at the end, and
// the bindings created, over [q.From, q.To). See package usage for the cost. A query
// whose From is not before To is a 400 *osb.Error; a store failure is
// returned as it came (ErrUnavailable: answer 503).
func (g *guard) Usage(ctx context.Context, q UsageQuery) (UsageReport, error) {
	return ReportUsage(ctx, g.st, q, g.now())
}

// ReportUsage is Gateway.Usage over the store st, with now the time a
// zero q.To stands for: for a command that opens the state store itself.
func ReportUsage(ctx context.Context, st store.Store, q UsageQuery, now time.Time) (UsageReport, error) {
	return usage.ReportUsage(ctx, st, q, now)
}

// LiveInstancesSeries returns the live instances per plan (broker, service
// and plan; of q's tenant, or all tenants) at q.From and every step after
// it up to q.To included, for a chart: a point per plan and time, sorted
// by time then broker, service and plan; every plan with an instance at
// any of those times has a point at each (zero where it had none). A
// step that is not positive, or that makes more than MaxUsagePoints
// times, is a 400 *osb.Error. Its cost is Usage's.
func (g *guard) LiveInstancesSeries(ctx context.Context, q UsageQuery, step time.Duration) ([]UsagePoint, error) {
	return usage.LiveInstancesSeries(ctx, g.st, q, step, g.now())
}

// PurgeUsage deletes the usage records that ended more than
// inventory.usage_retention before now, logs how many it deleted (when
// any) and returns that. SweepOperations calls it at every sweep: with
// nothing to purge it costs a seek (bolt) or a range per broker (Redis).
func (g *guard) PurgeUsage(ctx context.Context) (int, error) {
	before := g.now().Add(-g.cfg.Inventory.UsageRetention)
	n, err := g.st.PurgeUsage(ctx, before)
	if err != nil {
		g.log.LogAttrs(ctx, slog.LevelWarn, "purging usage records failed; the next sweep tries again",
			slog.Int("deleted", n), slog.String("error", err.Error()))
		return n, fmt.Errorf("purging usage records: %w", err)
	}
	if n > 0 {
		g.log.LogAttrs(ctx, slog.LevelInfo, "usage records past inventory.usage_retention purged",
			slog.Int("deleted", n), slog.Time("ended_before", before))
	}
	return n, nil
}

// ParseUsageQuery reads a UsageQuery from URL query values (see
// usage.ParseUsageQuery).
func ParseUsageQuery(v url.Values) (UsageQuery, error) { return usage.ParseUsageQuery(v) }

// BilledHours rounds hours as the usage CSV does (usage.BilledHours).
func BilledHours(h float64) float64 { return usage.BilledHours(h) }
