package catalog

import (
	"context"
	"fmt"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Weighing a broker's catalog changes against its inventory: how many
// live instances each change strands (see catalog_drift.go).

// instanceTally is what assess counts in a broker's inventory.
type instanceTally struct {
	byPlan, byService map[string]int
	failing           map[int]int // by index of a schema change: instances whose parameters fail the new schema only
	unchecked         map[int]int // by index of a schema change: instances without stored parameters
}

// Assess turns catalog changes into drift items: what counts against the
// broker's inventory (see the top of this file), and notes on what could
// not be checked.
func (t *DriftTracker) Assess(ctx context.Context, u *upstream.Upstream, changes []rules.CatalogChange) ([]DriftItem, []string, error) {
	if len(changes) == 0 {
		return nil, nil, nil
	}
	var notes []string
	counted := t.Inv.Keeps(u)
	if !counted {
		notes = append(notes, fmt.Sprintf("brokers[%s].inventory is off: live instances are not known, every change that may strand them is reported", u.Name))
	}
	params := counted && t.Inv.SealsFor(u)
	tally, err := t.tally(ctx, u.Name, changes, counted, params)
	if err != nil {
		return nil, nil, err
	}
	var items []DriftItem
	for i, c := range changes {
		n := tally.byPlan[c.OldID]
		if c.ByService {
			n = tally.byService[c.OldID]
		}
		it := DriftItem{Kind: c.Kind, Service: c.Service, Plan: c.Plan, OldID: c.OldID, NewID: c.NewID, LiveInstances: n, Detail: c.Detail}
		switch {
		case c.Kind == rules.DriftGUIDChanged:
		case c.Kind == rules.DriftSchemaIncompatible:
			if !params {
				if n > 0 || !counted {
					notes = append(notes, c.Detail+"; the parameters of its instances are not stored (brokers[].inventory.secrets: encrypted with inventory.key_file keeps them), so they were not checked")
				}
				continue
			}
			if m := tally.unchecked[i]; m > 0 {
				notes = append(notes, fmt.Sprintf("%s; %d of its instances have no stored parameters and were not checked", c.Detail, m))
			}
			if it.LiveInstances = tally.failing[i]; it.LiveInstances == 0 {
				continue
			}
			it.Detail = fmt.Sprintf("%s: the stored parameters of %d live instances no longer pass it", c.Detail, it.LiveInstances)
		case n == 0 && counted:
			continue // strands nothing
		}
		items = append(items, it)
	}
	return items, notes, nil
}

// tally lists the broker's instances once: how many are on each plan and
// service, and, with params, whose stored parameters fail a changed
// schema they passed before.
func (t *DriftTracker) tally(ctx context.Context, broker string, changes []rules.CatalogChange, counted, params bool) (instanceTally, error) {
	tl := instanceTally{byPlan: map[string]int{}, byService: map[string]int{}, failing: map[int]int{}, unchecked: map[int]int{}}
	if !counted {
		return tl, nil
	}
	schemaChanges := map[string][]int{} // plan id → indexes of its schema changes
	if params {
		for i, c := range changes {
			if c.Kind == rules.DriftSchemaIncompatible {
				schemaChanges[c.OldID] = append(schemaChanges[c.OldID], i)
			}
		}
	}
	cursor := ""
	for {
		page, next, err := t.St.ListInstances(ctx, store.InstanceFilter{Broker: broker}, cursor, store.MaxListLimit)
		if err != nil {
			return tl, err
		}
		for _, in := range page {
			tl.byPlan[in.PlanID]++
			tl.byService[in.ServiceID]++
			for _, i := range schemaChanges[in.PlanID] {
				p := t.Inv.Open(ctx, in.SealedParameters, "parameters", in.Broker, in.InstanceID, "")
				if p == nil {
					tl.unchecked[i]++
					continue
				}
				if changes[i].Old.Validate(p) == nil && changes[i].New.Validate(p) != nil {
					tl.failing[i]++
				}
			}
		}
		if next == "" {
			return tl, nil
		}
		cursor = next
	}
}
