package guard

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy/internal/usage"
)

// Usage returns the usage report of q: per tenant, broker, service and
// plan, the instance-hours, instances and live instances at the end, and
// the bindings created, over [q.From, q.To). See package usage for the cost. A query
// whose From is not before To is a 400 *osb.Error; a store failure is
// returned as it came (ErrUnavailable: answer 503).
func (g *Guard) Usage(ctx context.Context, q usage.UsageQuery) (usage.UsageReport, error) {
	return usage.ReportUsage(ctx, g.St, q, g.Now())
}

// LiveInstancesSeries returns the live instances per plan (broker, service
// and plan; of q's tenant, or all tenants) at q.From and every step after
// it up to q.To included, for a chart: a point per plan and time, sorted
// by time then broker, service and plan; every plan with an instance at
// any of those times has a point at each (zero where it had none). A
// step that is not positive, or that makes more than MaxUsagePoints
// times, is a 400 *osb.Error. Its cost is Usage's.
func (g *Guard) LiveInstancesSeries(ctx context.Context, q usage.UsageQuery, step time.Duration) ([]usage.UsagePoint, error) {
	return usage.LiveInstancesSeries(ctx, g.St, q, step, g.Now())
}

// PurgeUsage deletes the usage records that ended more than
// inventory.usage_retention before now, logs how many it deleted (when
// any) and returns that. SweepOperations calls it at every sweep: with
// nothing to purge it costs a seek (bolt) or a range per broker (Redis).
func (g *Guard) PurgeUsage(ctx context.Context) (int, error) {
	before := g.Now().Add(-g.Cfg.Inventory.UsageRetention)
	n, err := g.St.PurgeUsage(ctx, before)
	if err != nil {
		g.Log.LogAttrs(ctx, slog.LevelWarn, "purging usage records failed; the next sweep tries again",
			slog.Int("deleted", n), slog.String("error", err.Error()))
		return n, fmt.Errorf("purging usage records: %w", err)
	}
	if n > 0 {
		g.Log.LogAttrs(ctx, slog.LevelInfo, "usage records past inventory.usage_retention purged",
			slog.Int("deleted", n), slog.Time("ended_before", before))
	}
	return n, nil
}
