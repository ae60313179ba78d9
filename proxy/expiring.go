package proxy

import "context"

// CountExpiringBindings returns, for every configured broker, how many of
// its bindings in the inventory have an expires_at within
// inventory.expiry_warning from now (or already past): the
// osb_gateway_bindings_expiring gauge (see ObserveExpiring). A broker with
// none is there with 0; brokers no longer configured are left out.
func (g *Gateway) CountExpiringBindings(ctx context.Context) (map[string]int, error) {
	counts, err := g.guard.St.CountExpiring(ctx, g.guard.Now().Add(g.cfg.Inventory.ExpiryWarning))
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(g.cfg.Brokers))
	for _, b := range g.cfg.Brokers {
		out[b.Name] = counts[b.Name]
	}
	return out, nil
}
