package proxy

import (
	"context"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// CountInstances returns the live instances per tenant, broker, service
// and plan, from a listing of the inventory (see osb_gateway_instances).
func (g *Gateway) CountInstances(ctx context.Context) ([]InstanceCount, error) {
	type key struct{ tenant, broker, service, plan string }
	counts := map[key]int{}
	cursor := ""
	for {
		page, next, err := g.guard.St.ListInstances(ctx, store.InstanceFilter{}, cursor, store.MaxListLimit)
		if err != nil {
			return nil, err
		}
		for _, in := range page {
			counts[key{in.Tenant, in.Broker, in.ServiceID, in.PlanID}]++
		}
		if next == "" {
			break
		}
		cursor = next
	}
	out := make([]InstanceCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, InstanceCount{Tenant: k.tenant, Broker: k.broker, Service: k.service, Plan: k.plan, Live: n})
	}
	return out, nil
}
