package rules

import (
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Index is a broker's catalog decoded once, with lookups by id and name, the
// plans' parameter schemas and the catalog's lint findings. The gateway
// builds one per catalog version and reads it on every request.
//
// An Index is safe for concurrent use. It does not change once built, but
// for its parameter schemas: each is compiled on first use, once, however
// many goroutines ask. The pointers its methods return point into it:
// callers must not modify what they point to.
//
// Where the catalog repeats an id or name (a lint error), lookups find the
// first service or plan with it, in catalog order.
type Index struct {
	catalog      osb.Catalog
	findings     []Finding                // the compile-free ones, as NewIndex returned them
	services     map[string]*serviceEntry // by id
	serviceNames map[string]*serviceEntry // by name
	plans        map[string]*planEntry    // by id, across services
	// anyInstancesRetrievable, anyBindingsRetrievable: some service says
	// instances_retrievable (bindings_retrievable); see Retrievable.
	anyInstancesRetrievable, anyBindingsRetrievable bool
	// schemas are the catalog's distinct parameter schemas; NewIndexFrom
	// takes them from its predecessor by content.
	schemas *schemaSet
	// slots are the plans' uses of schemas, in catalog order: where
	// compile findings go among findings.
	slots []schemaSlot

	allOnce sync.Once
	all     []Finding // findings with the compile findings, once compiled

	body      []byte // the catalog body, as the broker wrote it
	spansOnce sync.Once
	spans     *catalogSpans // where View finds services and plans in body
	spansErr  error
}

// serviceEntry is a service and its plans by name.
type serviceEntry struct {
	service   *osb.Service
	planNames map[string]*planEntry
}

// planEntry is a plan, its service and its parameter schemas (nil where the
// plan has none).
type planEntry struct {
	service *osb.Service
	plan    *osb.Plan
	schemas [numSchemaKinds]*schemaResult
}

// NewIndex decodes a catalog body (GET /v2/catalog), builds the lookups and
// lints the catalog. The error is for a body that is not a JSON object or
// does not decode into the catalog's types (a boolean that is a string,
// say); it names the byte offset and, for a wrong type, the path. Everything
// else is a Finding, sorted by path in catalog order.
//
// NewIndex compiles no parameter schema: ParameterSchema compiles each on
// first use. The findings it returns are those found without compiling:
// every check on the catalog, and those on its schemas that need no
// compiler (size, a JSON object, "$schema" present and a known draft, root
// "type": "object", external references). Those only the compiler finds (a
// schema invalid against its metaschema, a pattern RE2 cannot compile) are
// LintSchemas'; Findings returns both. A schema that does not compile is an
// error finding of one or the other, and requests for that plan are not
// validated against it: the broker still sees and judges the parameters.
//
// The Index keeps body, from which View serves tenants' views of the
// catalog: the caller must not change it afterwards.
//
// Building the index of a 1 MB catalog takes about 15 ms, mostly decoding.
// Compiling, about 0.3 ms of CPU per kilobyte-sized schema, is left for when
// a schema is used.
func NewIndex(body []byte) (*Index, []Finding, error) {
	return NewIndexFrom(nil, body)
}

// NewIndexFrom is NewIndex for the next version of the catalog prev was
// built from: schemas whose bytes did not change are taken from prev, with
// their checks and, if done, their compilation, which makes refreshing a
// large catalog that changed little cheap. prev may be nil; it keeps
// working, sharing those schemas' compilations with the new index.
func NewIndexFrom(prev *Index, body []byte) (*Index, []Finding, error) {
	w, err := decodeCatalog(body)
	if err != nil {
		return nil, nil, err
	}
	ix := &Index{catalog: w.toCatalog(), body: body}
	var reuse map[schemaKey]*schemaResult
	if prev != nil {
		reuse = prev.schemas.byKey
	}
	ix.schemas = collectSchemas(&ix.catalog, reuse)
	ix.findings, ix.slots = lintCatalog(w, ix.schemas)
	ix.build()
	return ix, slices.Clone(ix.findings), nil
}

// build fills the lookup maps; the first of duplicate ids or names wins.
func (ix *Index) build() {
	n := len(ix.catalog.Services)
	ix.services = make(map[string]*serviceEntry, n)
	ix.serviceNames = make(map[string]*serviceEntry, n)
	ix.plans = make(map[string]*planEntry, n*4)
	for i := range ix.catalog.Services {
		s := &ix.catalog.Services[i]
		se := &serviceEntry{service: s, planNames: make(map[string]*planEntry, len(s.Plans))}
		putFirst(ix.services, s.ID, se)
		ix.anyInstancesRetrievable = ix.anyInstancesRetrievable || s.InstancesRetrievable
		ix.anyBindingsRetrievable = ix.anyBindingsRetrievable || s.BindingsRetrievable
		putFirst(ix.serviceNames, s.Name, se)
		for j := range s.Plans {
			pe := &planEntry{service: s, plan: &s.Plans[j]}
			for k := range SchemaKind(numSchemaKinds) {
				pe.schemas[k] = ix.schemas.result(i, j, k)
			}
			putFirst(ix.plans, pe.plan.ID, pe)
			putFirst(se.planNames, pe.plan.Name, pe)
		}
	}
}

// putFirst stores v under k unless k is taken.
func putFirst[V any](m map[string]V, k string, v V) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

// Catalog returns the decoded catalog. Service.Bindable holds false where
// the broker left "bindable" out (a lint error).
func (ix *Index) Catalog() *osb.Catalog { return &ix.catalog }

// Findings returns the catalog's lint findings, sorted by path in catalog
// order: those NewIndex returned and LintSchemas', merged. The first call
// compiles every parameter schema not compiled yet (see LintSchemas), which
// for a large catalog takes a while; the gateway's request path never calls
// it. It returns a new slice each time.
func (ix *Index) Findings() []Finding {
	ix.allOnce.Do(func() {
		ix.schemas.compileAll()
		ix.all = withCompileFindings(ix.findings, ix.slots)
	})
	return slices.Clone(ix.all)
}

// LintSchemas compiles every parameter schema of the catalog not compiled
// yet, on up to GOMAXPROCS goroutines, and returns the findings only
// compiling finds: a schema invalid against its draft's metaschema, a
// pattern Go's regexp package (RE2) cannot compile, a reference the compiler
// cannot resolve. A schema shared by several plans is compiled once and
// reported at each, in catalog order. NewIndex's findings do not hold these;
// Findings holds both.
func (ix *Index) LintSchemas() []Finding {
	ix.schemas.compileAll()
	var fs []Finding
	for _, s := range ix.slots {
		for _, p := range s.res.compile().compileProblems {
			fs = append(fs, Finding{Path: s.path(), Severity: p.severity, Message: p.message})
		}
	}
	return fs
}

// Service returns the service with the id, or nil.
func (ix *Index) Service(id string) *osb.Service {
	if se := ix.services[id]; se != nil {
		return se.service
	}
	return nil
}

// Retrievable reports whether the broker, by its catalog, answers e (GET
// instance or GET binding) for an instance of the service serviceID: the
// service's instances_retrievable or bindings_retrievable. For a service
// the catalog does not name ("" for an instance whose service nobody
// knows) it reports whether any service of the catalog is retrievable: a
// broker none of whose services is answers for no instance at all. Other
// endpoints: false.
func (ix *Index) Retrievable(e Endpoint, serviceID string) bool {
	s := ix.Service(serviceID)
	switch {
	case e == GetInstance && s != nil:
		return s.InstancesRetrievable
	case e == GetInstance:
		return ix.anyInstancesRetrievable
	case e == GetBinding && s != nil:
		return s.BindingsRetrievable
	case e == GetBinding:
		return ix.anyBindingsRetrievable
	}
	return false
}

// ServiceByName returns the service with the name, or nil.
func (ix *Index) ServiceByName(name string) *osb.Service {
	if se := ix.serviceNames[name]; se != nil {
		return se.service
	}
	return nil
}

// PlanByID returns the plan with the id and its service, or nils. Plan ids
// are unique across a catalog.
func (ix *Index) PlanByID(planID string) (*osb.Service, *osb.Plan) {
	if pe := ix.plans[planID]; pe != nil {
		return pe.service, pe.plan
	}
	return nil, nil
}

// PlanByName returns the plan of the named service with the plan name, and
// the service, or nils.
func (ix *Index) PlanByName(serviceName, planName string) (*osb.Service, *osb.Plan) {
	if se := ix.serviceNames[serviceName]; se != nil {
		if pe := se.planNames[planName]; pe != nil {
			return pe.service, pe.plan
		}
	}
	return nil, nil
}

// Plan returns the service and plan a provision, update or bind names. It
// refuses, with a 400 *osb.Error, a service_id the catalog does not have and
// a plan_id that is not a plan of that service.
func (ix *Index) Plan(serviceID, planID string) (*osb.Service, *osb.Plan, error) {
	se := ix.services[serviceID]
	if se == nil {
		return nil, nil, osb.Errorf(http.StatusBadRequest, "", "service_id %q is not a service in the broker's catalog", serviceID)
	}
	pe := ix.plans[planID]
	switch {
	case pe != nil && pe.service == se.service:
		return pe.service, pe.plan, nil
	case pe != nil:
		return nil, nil, osb.Errorf(http.StatusBadRequest, "", "plan_id %q is a plan of service %q, not of service %q",
			planID, pe.service.Name, se.service.Name)
	}
	return nil, nil, osb.Errorf(http.StatusBadRequest, "", "plan_id %q is not a plan of service %q in the broker's catalog",
		planID, se.service.Name)
}

// Bindable reports whether instances of the plan may be bound: the plan's
// own "bindable" when set, else its service's. False for an unknown plan.
func (ix *Index) Bindable(planID string) bool {
	pe := ix.plans[planID]
	return pe != nil && osb.PlanBindable(pe.service, pe.plan)
}

// PlanUpdateable reports whether an update may move an instance of the plan
// to another plan: the plan's own "plan_updateable" when set, else its
// service's. False for an unknown plan.
func (ix *Index) PlanUpdateable(planID string) bool {
	pe := ix.plans[planID]
	return pe != nil && osb.PlanUpdateable(pe.service, pe.plan)
}

// MaximumPollingDuration returns the plan's maximum_polling_duration (OSB
// 2.15), and false when the plan is unknown or sets none that is positive.
func (ix *Index) MaximumPollingDuration(planID string) (time.Duration, bool) {
	pe := ix.plans[planID]
	if pe == nil || pe.plan.MaximumPollingDuration == nil || *pe.plan.MaximumPollingDuration <= 0 {
		return 0, false
	}
	secs := *pe.plan.MaximumPollingDuration
	if int64(secs) > math.MaxInt64/int64(time.Second) {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(secs) * time.Second, true
}

// MaintenanceInfo returns the plan's maintenance_info (OSB 2.15), or nil.
func (ix *Index) MaintenanceInfo(planID string) *osb.MaintenanceInfo {
	if pe := ix.plans[planID]; pe != nil {
		return pe.plan.MaintenanceInfo
	}
	return nil
}

// Requires returns the permissions the service lists in "requires", or nil.
func (ix *Index) Requires(serviceID string) []string {
	if s := ix.Service(serviceID); s != nil {
		return s.Requires
	}
	return nil
}

// ServiceRequires reports whether the service lists permission (such as
// RequireSyslogDrain) in "requires".
func (ix *Index) ServiceRequires(serviceID, permission string) bool {
	return slices.Contains(ix.Requires(serviceID), permission)
}

// ParameterSchema returns the plan's compiled schema of the kind, or nil
// when the plan is unknown, has no such schema, or its schema does not
// compile. A nil *CompiledSchema validates anything.
//
// The first call for a schema compiles it (plans that send the same schema
// share one compilation); concurrent callers wait for it, later ones do not.
func (ix *Index) ParameterSchema(planID string, kind SchemaKind) *CompiledSchema {
	if pe := ix.plans[planID]; pe != nil && int(kind) < numSchemaKinds {
		return pe.schemas[kind].schema()
	}
	return nil
}
