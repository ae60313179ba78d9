package policy

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/interpreter"
)

// The variables a rule sees (docs/policies.md lists them with examples).
// Maps with dyn values hold decoded JSON: objects are maps, arrays lists,
// integral numbers int, other numbers double. A map whose source is absent
// is empty, never missing, so has(request.parameters.size) is safe.
const (
	VarRequest         = "request"          // map(string, dyn): the decoded OSB request body; parameters and context always present
	VarCall            = "call"             // map(string, string): endpoint, instance_id, binding_id, broker
	VarTenant          = "tenant"           // string: the tenant's name
	VarUsername        = "username"         // string: the credential's username ("" with a client certificate)
	VarIdentity        = "identity"         // map(string, dyn): platform and value, the decoded originating identity
	VarContext         = "context"          // map(string, dyn): the request's context, else the instance record's
	VarService         = "service"          // map(string, dyn): id, name, metadata from the catalog
	VarPlan            = "plan"             // map(string, dyn): id, name, metadata, free from the catalog
	VarPreviousValues  = "previous_values"  // map(string, dyn): the update's previous_values
	VarMaintenanceInfo = "maintenance_info" // map(string, dyn): the request's maintenance_info
	VarInstance        = "instance"         // map(string, dyn): exists, tenant, service, plan, context, created (the inventory's record)
	VarNow             = "now"              // timestamp: when the gateway received the call
)

// Input is what one call offers the rules. The adapter fills it; nothing
// in it is changed by evaluation.
type Input struct {
	// Endpoint is the call's endpoint name (rules.Endpoint.String()).
	Endpoint string
	// Broker and Tenant name the route; Username the tenant credential.
	Broker, Tenant, Username string
	// InstanceID and BindingID are the call's ids.
	InstanceID, BindingID string
	// Identity is the X-Broker-API-Originating-Identity header, "" for none.
	Identity string
	// Body is the request body as the platform sent it (JSON), nil for none.
	Body []byte
	// Service and Plan are the call's service and plan, named from the
	// catalog when it has them (Name empty otherwise).
	Service, Plan Offering
	// Instance returns the inventory's record of the instance, or nil for
	// none; nil Instance: none. Called at most once, and only when a rule
	// reads the instance variable.
	Instance func() *Instance
	// Now is when the call came.
	Now time.Time
}

// Offering is a service or a plan as the catalog describes it.
type Offering struct {
	ID, Name string
	// Metadata is the catalog's metadata object, nil for none.
	Metadata json.RawMessage
	// Free is the plan's free flag, nil when the catalog does not say.
	Free *bool
}

// Instance is the inventory's record of an existing instance.
type Instance struct {
	Tenant        string
	Service, Plan Offering
	Context       json.RawMessage
	Created       time.Time
}

// declarations are the variables' CEL types.
func declarations() []cel.EnvOption {
	dynMap := cel.MapType(cel.StringType, cel.DynType)
	return []cel.EnvOption{
		cel.Variable(VarRequest, dynMap),
		cel.Variable(VarCall, cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable(VarTenant, cel.StringType),
		cel.Variable(VarUsername, cel.StringType),
		cel.Variable(VarIdentity, dynMap),
		cel.Variable(VarContext, dynMap),
		cel.Variable(VarService, dynMap),
		cel.Variable(VarPlan, dynMap),
		cel.Variable(VarPreviousValues, dynMap),
		cel.Variable(VarMaintenanceInfo, dynMap),
		cel.Variable(VarInstance, dynMap),
		cel.Variable(VarNow, cel.TimestampType),
	}
}

// activation resolves the variables of one call, each decoded and made a
// CEL value on first use and kept for the call's other rules. Not safe
// for concurrent use.
type activation struct {
	in   *Input
	req  map[string]ref.Val // the decoded body; nil until decoded
	inst map[string]ref.Val // the instance variable; nil until looked up
	ctx  ref.Val            // the context variable; nil until resolved
	vals [numVars]ref.Val   // the variables resolved so far, by varNames' order
}

var _ interpreter.Activation = (*activation)(nil)

// varNames are the variables by index (activation.vals).
var varNames = [...]string{VarRequest, VarCall, VarTenant, VarUsername, VarIdentity, VarContext, VarService,
	VarPlan, VarPreviousValues, VarMaintenanceInfo, VarInstance, VarNow}

const numVars = len(varNames)

// Parent implements interpreter.Activation: there is none.
func (a *activation) Parent() interpreter.Activation { return nil }

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	i := varIndex(name)
	if i < 0 {
		return nil, false
	}
	if a.vals[i] == nil {
		a.vals[i] = a.value(name)
	}
	return a.vals[i], true
}

// varIndex is name's index in varNames, -1 for none.
func varIndex(name string) int {
	switch name {
	case VarRequest:
		return 0
	case VarCall:
		return 1
	case VarTenant:
		return 2
	case VarUsername:
		return 3
	case VarIdentity:
		return 4
	case VarContext:
		return 5
	case VarService:
		return 6
	case VarPlan:
		return 7
	case VarPreviousValues:
		return 8
	case VarMaintenanceInfo:
		return 9
	case VarInstance:
		return 10
	case VarNow:
		return 11
	}
	return -1
}

// value is the CEL value of a variable.
func (a *activation) value(name string) ref.Val {
	switch name {
	case VarRequest:
		return mapVal(a.request())
	case VarCall:
		return mapVal(map[string]ref.Val{"endpoint": types.String(a.in.Endpoint), "instance_id": types.String(a.in.InstanceID),
			"binding_id": types.String(a.in.BindingID), "broker": types.String(a.in.Broker)})
	case VarTenant:
		return types.String(a.in.Tenant)
	case VarUsername:
		return types.String(a.in.Username)
	case VarIdentity:
		return identity(a.in.Identity)
	case VarContext:
		return a.context()
	case VarService:
		return offering(a.in.Service)
	case VarPlan:
		return offering(a.in.Plan)
	case VarPreviousValues:
		return member(a.request(), "previous_values")
	case VarMaintenanceInfo:
		return member(a.request(), "maintenance_info")
	case VarInstance:
		return mapVal(a.instance())
	}
	return types.Timestamp{Time: a.in.Now} // VarNow
}

// mapVal makes m a CEL map.
func mapVal(m map[string]ref.Val) ref.Val { return types.NewMap(types.DefaultTypeAdapter, m) }

// emptyMap is the value of an absent object.
var emptyMap = mapVal(map[string]ref.Val{})

// request is the decoded body, with parameters and context present.
func (a *activation) request() map[string]ref.Val {
	if a.req != nil {
		return a.req
	}
	a.req = decodeObject(a.in.Body)
	if a.req == nil {
		a.req = map[string]ref.Val{}
	}
	for _, k := range [...]string{"parameters", "context"} {
		if _, ok := a.req[k].(traits.Mapper); !ok {
			a.req[k] = emptyMap
		}
	}
	return a.req
}

// context is the request's context when it has one, else the instance
// record's.
func (a *activation) context() ref.Val {
	if a.ctx != nil {
		return a.ctx
	}
	a.ctx = member(a.request(), "context")
	if a.ctx.(traits.Sizer).Size() == types.IntZero {
		a.ctx = member(a.instance(), "context")
	}
	return a.ctx
}

// instance is the inventory's record, looked up once.
func (a *activation) instance() map[string]ref.Val {
	if a.inst != nil {
		return a.inst
	}
	var in *Instance
	if a.in.Instance != nil {
		in = a.in.Instance()
	}
	if in == nil {
		a.inst = map[string]ref.Val{"exists": types.False}
		return a.inst
	}
	ctx := emptyMap
	if m := decodeObject(in.Context); m != nil {
		ctx = mapVal(m)
	}
	a.inst = map[string]ref.Val{"exists": types.True, "tenant": types.String(in.Tenant), "service": offering(in.Service),
		"plan": offering(in.Plan), "context": ctx, "created": types.Timestamp{Time: in.Created}}
	return a.inst
}

// member returns m[k] when it is an object, else an empty map.
func member(m map[string]ref.Val, k string) ref.Val {
	if v, ok := m[k].(traits.Mapper); ok {
		return v
	}
	return emptyMap
}

// offering is o as the service and plan variables show it.
func offering(o Offering) ref.Val {
	md := emptyMap
	if m := decodeObject(o.Metadata); m != nil {
		md = mapVal(m)
	}
	m := map[string]ref.Val{"id": types.String(o.ID), "name": types.String(o.Name), "metadata": md}
	if o.Free != nil {
		m["free"] = types.Bool(*o.Free)
	}
	return mapVal(m)
}

// identity decodes "<platform> <base64 JSON>"; value is empty when the
// header has none or it does not decode.
func identity(h string) ref.Val {
	platform, enc, _ := strings.Cut(strings.TrimSpace(h), " ")
	m := map[string]ref.Val{"platform": types.String(platform), "value": emptyMap}
	if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc)); err == nil {
		if v := decodeObject(raw); v != nil {
			m["value"] = mapVal(v)
		}
	}
	return mapVal(m)
}
