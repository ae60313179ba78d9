package rules

import (
	"bytes"
	"fmt"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Catalog drift: the changes between a broker's accepted catalog and a
// newer one that hurt a platform holding instances on the old one. Cloud
// Controller matches services and plans by id: an id changed under a kept
// name is a new plan to it (and the old one is gone), a removed plan or
// service strands its instances, and a plan made unbindable or not
// updatable refuses what its instances did before.

// Drift kinds, as the drift report and the metric name them.
const (
	// DriftGUIDChanged: a service's or plan's id changed under the same
	// name.
	DriftGUIDChanged = "guid_changed"
	// DriftServiceRemoved: a service is gone (no id, no name left).
	DriftServiceRemoved = "service_removed"
	// DriftPlanRemoved: a plan of a kept service is gone.
	DriftPlanRemoved = "plan_removed"
	// DriftMadeUnbindable: a plan that was bindable is not.
	DriftMadeUnbindable = "made_unbindable"
	// DriftMadeNonUpdatable: a plan whose instances could change plans
	// cannot (plan_updateable false).
	DriftMadeNonUpdatable = "made_non_updatable"
	// DriftSchemaIncompatible: a plan's create or update parameter schema
	// changed; whether the parameters of its instances still pass is for
	// the caller, who holds them.
	DriftSchemaIncompatible = "schema_incompatible"
)

// DriftKinds are the drift kinds, in the order reports list them.
var DriftKinds = []string{DriftGUIDChanged, DriftServiceRemoved, DriftPlanRemoved,
	DriftMadeUnbindable, DriftMadeNonUpdatable, DriftSchemaIncompatible}

// CatalogChange is one change between two catalogs that may hurt the
// instances of what changed.
type CatalogChange struct {
	// Kind is one of the Drift kinds.
	Kind string
	// Service and Plan name what changed, as in the old catalog (Plan is
	// empty for a change of a service).
	Service, Plan string
	// OldID is the id of what changed in the old catalog: the instances
	// that name it are the ones the change reaches. NewID is its id in the
	// new catalog ("" when gone).
	OldID, NewID string
	// ByService means OldID is a service id (instances are counted by
	// their service_id), not a plan id.
	ByService bool
	// Schema is, for DriftSchemaIncompatible, the kind of the schema that
	// changed (InstanceCreate or InstanceUpdate); Old and New are its
	// compiled schemas (nil: none, which accepts anything).
	Schema   SchemaKind
	Old, New *CompiledSchema
	// Detail says what changed, for a person.
	Detail string
}

// CatalogChanges returns the changes from old to new that may hurt
// instances, in catalog order (old's services, each followed by its
// plans): ids changed under a kept name, services and plans removed,
// plans made unbindable or not updatable, and plans whose create or
// update schema changed. What was added, renamed with its id kept, or
// changed otherwise is left out.
func CatalogChanges(old, new *Index) []CatalogChange {
	var out []CatalogChange
	for i := range old.catalog.Services {
		s := &old.catalog.Services[i]
		ns := new.Service(s.ID)
		if ns == nil {
			if ns = new.ServiceByName(s.Name); ns == nil {
				out = append(out, CatalogChange{Kind: DriftServiceRemoved, Service: s.Name, OldID: s.ID, ByService: true,
					Detail: fmt.Sprintf("service %q (id %s) is no longer in the catalog", s.Name, s.ID)})
				continue
			}
			out = append(out, CatalogChange{Kind: DriftGUIDChanged, Service: s.Name, OldID: s.ID, NewID: ns.ID, ByService: true,
				Detail: fmt.Sprintf("service %q changed its id from %s to %s", s.Name, s.ID, ns.ID)})
		}
		for j := range s.Plans {
			out = append(out, planChanges(s, &s.Plans[j], ns, old, new)...)
		}
	}
	return out
}

// planChanges compares plan p of service s (of old) with its namesake in
// ns (of new).
func planChanges(s *osb.Service, p *osb.Plan, ns *osb.Service, old, new *Index) []CatalogChange {
	nsvc, np := new.PlanByID(p.ID)
	if np == nil {
		for k := range ns.Plans {
			if ns.Plans[k].Name == p.Name {
				np = &ns.Plans[k]
				break
			}
		}
		if np == nil {
			return []CatalogChange{{Kind: DriftPlanRemoved, Service: s.Name, Plan: p.Name, OldID: p.ID,
				Detail: fmt.Sprintf("plan %q of service %q (id %s) is no longer in the catalog", p.Name, s.Name, p.ID)}}
		}
		return []CatalogChange{{Kind: DriftGUIDChanged, Service: s.Name, Plan: p.Name, OldID: p.ID, NewID: np.ID,
			Detail: fmt.Sprintf("plan %q of service %q changed its id from %s to %s", p.Name, s.Name, p.ID, np.ID)}}
	}
	var out []CatalogChange
	at := func(kind, detail string) CatalogChange {
		return CatalogChange{Kind: kind, Service: s.Name, Plan: p.Name, OldID: p.ID, NewID: np.ID, Detail: detail}
	}
	if osb.PlanBindable(s, p) && !osb.PlanBindable(nsvc, np) {
		out = append(out, at(DriftMadeUnbindable, fmt.Sprintf("plan %q of service %q is no longer bindable", p.Name, s.Name)))
	}
	if osb.PlanUpdateable(s, p) && !osb.PlanUpdateable(nsvc, np) {
		out = append(out, at(DriftMadeNonUpdatable, fmt.Sprintf("plan %q of service %q is no longer plan_updateable", p.Name, s.Name)))
	}
	for _, k := range []SchemaKind{InstanceCreate, InstanceUpdate} {
		if bytes.Equal(rawSchema(p, k), rawSchema(np, k)) {
			continue
		}
		c := at(DriftSchemaIncompatible, fmt.Sprintf("the %s schema of plan %q of service %q changed", k, p.Name, s.Name))
		c.Schema, c.Old, c.New = k, old.ParameterSchema(p.ID, k), new.ParameterSchema(np.ID, k)
		out = append(out, c)
	}
	return out
}
