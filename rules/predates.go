package rules

import (
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Part is where in a platform's request a flag or field travels.
type Part uint8

// The parts of a request a Predated row names.
const (
	// PartEndpoint is the endpoint itself (method and path).
	PartEndpoint Part = iota + 1
	// PartQuery is a query parameter.
	PartQuery
	// PartBody is a top-level member of the request body.
	PartBody
	// PartHeader is a request header.
	PartHeader
)

// String names the part for documentation: "endpoint", "query", "body",
// "header".
func (p Part) String() string {
	switch p {
	case PartEndpoint:
		return "endpoint"
	case PartQuery:
		return "query"
	case PartBody:
		return "body"
	case PartHeader:
		return "header"
	}
	return "unknown"
}

// Handling is what the gateway does with a flag or field that a broker's
// newest API version predates.
type Handling uint8

// The handlings of the predated table.
const (
	// Drop removes it from the broker call; the broker's answer goes to the
	// platform as for any call.
	Drop Handling = iota + 1
	// Forward sends it as the platform sent it: to the broker it is an
	// extension field (or header), which the specification tells receivers
	// to ignore.
	Forward
	// Refuse answers 412 without reaching the broker: what the platform asks
	// for cannot be served by that broker.
	Refuse
)

// String names the handling for documentation: "dropped", "forwarded",
// "412".
func (h Handling) String() string {
	switch h {
	case Drop:
		return "dropped"
	case Forward:
		return "forwarded"
	case Refuse:
		return "412"
	}
	return "unknown"
}

// Predated is one row of the predated table: something a platform may send
// that an older broker's version does not have, and what the gateway does
// with it when the platform's version has it and the broker's newest
// version (api_version.max) is below Since.
type Predated struct {
	// Part and Name say what it is: an endpoint ("GET instance"), a query
	// parameter as sent ("accepts_incomplete=true"), a body member
	// ("predecessor_binding_id") or a header.
	Part Part
	Name string
	// Since is the API version that brought it; brokers whose newest
	// version is older predate it.
	Since osb.Version
	// Handling is what the gateway does for those brokers.
	Handling Handling
	// Reason says, for a person, why that handling changes nothing the
	// platform relies on (or, for Refuse, why nothing else would do).
	Reason string

	on endpointSet
	// key is the query parameter or body member that a Drop row removes.
	key string
}

// Endpoints returns the endpoints the row applies to, in table order.
func (p Predated) Endpoints() []Endpoint {
	var es []Endpoint
	for e := range endpoints {
		if p.on.has(Endpoint(e)) {
			es = append(es, Endpoint(e))
		}
	}
	return es
}

// v2_17 is the version of binding rotation and binding expiry.
var v2_17 = osb.Version{Major: 2, Minor: 17}

var (
	bindingCalls = endpointsOf(Bind, Unbind)
	everyCall    = endpointsOf(Catalog, Provision, Update, Deprovision, GetInstance, InstanceLastOperation,
		Bind, Unbind, GetBinding, BindingLastOperation)
)

// predatedTable is what the gateway does with what a broker's version
// predates. The Refuse rows of endpoints repeat the endpoint table's
// versions (TestPredatedEndpointsMatchTheEndpointTable checks): the endpoint
// table decides, these rows say why. The accepts_incomplete row is the
// async form of bind and unbind (asyncSince). Drop rows must stay few:
// ForwardingFor keeps them in a 16-bit set.
var predatedTable = [...]Predated{
	{Part: PartEndpoint, Name: "GET instance", on: endpointsOf(GetInstance), Since: v2_14, Handling: Refuse,
		Reason: "the broker has no such endpoint and nothing it answers tells what it holds; only the gateway's own record could (emulation, where configured)"},
	{Part: PartEndpoint, Name: "GET binding", on: endpointsOf(GetBinding), Since: v2_14, Handling: Refuse,
		Reason: "the broker has no such endpoint, and its credentials are not the gateway's to repeat (emulation, where configured)"},
	{Part: PartEndpoint, Name: "binding last_operation", on: endpointsOf(BindingLastOperation), Since: v2_14, Handling: Refuse,
		Reason: "the broker has no asynchronous bindings (accepts_incomplete is dropped from its binds and unbinds), so there is no binding operation of its to poll"},
	{Part: PartQuery, Name: "accepts_incomplete=true", key: "accepts_incomplete", on: bindingCalls, Since: v2_14, Handling: Drop,
		Reason: "the flag allows an asynchronous answer, it does not ask for one: without it the broker answers synchronously (200, 201), which is what a broker that never heard of asynchronous bindings does anyway and what a platform that sent the flag must accept"},
	{Part: PartBody, Name: "predecessor_binding_id", key: "predecessor_binding_id", on: endpointsOf(Bind), Since: v2_17, Handling: Drop,
		Reason: "a binding rotation is bridged as an ordinary bind: the broker creates the new binding with credentials of its own, and the predecessor stays valid until the platform unbinds it, as after any rotation"},
	{Part: PartBody, Name: "context", on: instanceBody, Since: v2_12, Handling: Forward,
		Reason: "an extension field to the broker; the organization and space it carries are copied to where the broker reads them (organization_guid and space_guid, an update's previous_values) by the version bridging"},
	{Part: PartBody, Name: "context", on: bindOnly, Since: v2_13, Handling: Forward,
		Reason: "an extension field to the broker; the app it binds is in app_guid, which a broker below 2.12 gets copied from bind_resource"},
	{Part: PartBody, Name: "maintenance_info", on: instanceBody, Since: v2_15, Handling: Forward,
		Reason: "never dropped: the platform relies on the broker acting on it (an upgrade). A broker that predates it has no maintenance_info in its catalog, so the request rules checked against the catalog refuse a request carrying one (422 MaintenanceInfoConflict) before it reaches the broker"},
	{Part: PartHeader, Name: osb.HeaderOriginatingIdentity, on: everyCall, Since: v2_13, Handling: Forward,
		Reason: "a header the broker does not know and ignores; the gateway's audit log records it either way"},
	{Part: PartHeader, Name: osb.HeaderRequestIdentity, on: everyCall, Since: v2_15, Handling: Forward,
		Reason: "the gateway sends one on every broker call (the platform's, or one it made), for the logs on both sides; a broker that predates it ignores it"},
}

// PredatedRules returns the predated table: for every flag, field or
// endpoint that some broker versions predate, whether the gateway drops
// it, forwards it or refuses the call. The list in docs/legacy-brokers.md
// is generated from it.
func PredatedRules() []Predated {
	return append([]Predated(nil), predatedTable[:]...)
}

// applies reports whether the row concerns a call of endpoint e from a
// platform at version v to a broker whose newest version is brokerMax.
func (p *Predated) applies(e Endpoint, v, brokerMax osb.Version) bool {
	return p.on.has(e) && brokerMax.Less(p.Since) && v.AtLeast(p.Since)
}

// Forwarding is what the gateway removes from one call for its broker: the
// Drop rows of the predated table that apply to it. The zero value removes
// nothing.
type Forwarding struct {
	drops uint16 // bit i: predatedTable[i]
}

// ForwardingFor returns the Drop rows that apply to call c from a platform
// speaking v to a broker whose newest version is brokerMax: rows of c's
// endpoint that v has and brokerMax lacks. A query row applies only when
// the query carries the flag (accepts_incomplete=true); a body row applies
// whether or not the body has the member (Bridge removes it if it does).
// It allocates nothing: it runs on every request.
func ForwardingFor(c Call, v, brokerMax osb.Version) Forwarding {
	var f Forwarding
	if !brokerMax.Less(v) {
		return f // the broker has everything the platform's version has
	}
	for i := range predatedTable {
		p := &predatedTable[i]
		if p.Handling != Drop || !p.applies(c.Endpoint, v, brokerMax) {
			continue
		}
		if p.Part == PartQuery && !(p.key == queryParams[paramAcceptsIncomplete] && c.AcceptsIncomplete) {
			continue
		}
		f.drops |= 1 << i
	}
	return f
}

// IsZero reports whether f removes nothing.
func (f Forwarding) IsZero() bool { return f.drops == 0 }

// each calls fn with every Drop row of f of the part.
func (f Forwarding) each(part Part, fn func(p *Predated)) {
	for i := range predatedTable {
		if f.drops&(1<<i) != 0 && predatedTable[i].Part == part {
			fn(&predatedTable[i])
		}
	}
}

// Call returns c as the broker gets it: without accepts_incomplete when f
// drops it. The version the broker needs is RequiredVersion of that call.
func (f Forwarding) Call(c Call) Call {
	f.each(PartQuery, func(p *Predated) {
		if p.key == queryParams[paramAcceptsIncomplete] {
			c.AcceptsIncomplete = false
		}
	})
	return c
}

// ChangesQuery reports whether Query changes a query.
func (f Forwarding) ChangesQuery() bool {
	changes := false
	f.each(PartQuery, func(*Predated) { changes = true })
	return changes
}

// Query returns rawQuery, a query Classify accepted, without the
// parameters f drops; every other parameter is kept as sent, in order.
func (f Forwarding) Query(rawQuery string) string {
	if !f.ChangesQuery() {
		return rawQuery
	}
	var b strings.Builder
	for rest := rawQuery; rest != ""; {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		rawKey, _, _ := strings.Cut(pair, "=")
		key, err := queryUnescape(rawKey)
		dropped := false
		f.each(PartQuery, func(p *Predated) { dropped = dropped || err == nil && key == p.key })
		if dropped {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(pair)
	}
	return b.String()
}

// bodyDrops returns the top-level body members f drops, or nil.
func (f Forwarding) bodyDrops() []string {
	var keys []string
	f.each(PartBody, func(p *Predated) { keys = append(keys, p.key) })
	return keys
}
