package policy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
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

// activation resolves the variables of one call, each decoded on first
// use and kept for the call's other rules. Not safe for concurrent use.
type activation struct {
	in      *Input
	req     map[string]any
	inst    map[string]any
	ctx     map[string]any
	decoded bool
	looked  bool
}

var _ interpreter.Activation = (*activation)(nil)

// Parent implements interpreter.Activation: there is none.
func (a *activation) Parent() interpreter.Activation { return nil }

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case VarRequest:
		return a.request(), true
	case VarCall:
		return map[string]string{"endpoint": a.in.Endpoint, "instance_id": a.in.InstanceID,
			"binding_id": a.in.BindingID, "broker": a.in.Broker}, true
	case VarTenant:
		return a.in.Tenant, true
	case VarUsername:
		return a.in.Username, true
	case VarIdentity:
		return identity(a.in.Identity), true
	case VarContext:
		return a.context(), true
	case VarService:
		return offering(a.in.Service), true
	case VarPlan:
		return offering(a.in.Plan), true
	case VarPreviousValues:
		return member(a.request(), "previous_values"), true
	case VarMaintenanceInfo:
		return member(a.request(), "maintenance_info"), true
	case VarInstance:
		return a.instance(), true
	case VarNow:
		return a.in.Now, true
	}
	return nil, false
}

// request is the decoded body, with parameters and context present.
func (a *activation) request() map[string]any {
	if a.decoded {
		return a.req
	}
	a.decoded = true
	a.req, _ = decodeObject(a.in.Body)
	if a.req == nil {
		a.req = map[string]any{}
	}
	for _, k := range [...]string{"parameters", "context"} {
		if _, ok := a.req[k].(map[string]any); !ok {
			a.req[k] = map[string]any{}
		}
	}
	return a.req
}

// context is the request's context when it has one, else the instance
// record's.
func (a *activation) context() map[string]any {
	if a.ctx != nil {
		return a.ctx
	}
	a.ctx = member(a.request(), "context")
	if len(a.ctx) == 0 {
		if c, ok := a.instance()["context"].(map[string]any); ok {
			a.ctx = c
		}
	}
	return a.ctx
}

// instance is the inventory's record, looked up once.
func (a *activation) instance() map[string]any {
	if a.looked {
		return a.inst
	}
	a.looked = true
	var in *Instance
	if a.in.Instance != nil {
		in = a.in.Instance()
	}
	if in == nil {
		a.inst = map[string]any{"exists": false}
		return a.inst
	}
	ctx, _ := decodeObject(in.Context)
	if ctx == nil {
		ctx = map[string]any{}
	}
	a.inst = map[string]any{"exists": true, "tenant": in.Tenant, "service": offering(in.Service),
		"plan": offering(in.Plan), "context": ctx, "created": in.Created}
	return a.inst
}

// member returns m[k] when it is an object, else an empty map.
func member(m map[string]any, k string) map[string]any {
	if v, ok := m[k].(map[string]any); ok {
		return v
	}
	return map[string]any{}
}

// offering is o as the service and plan variables show it.
func offering(o Offering) map[string]any {
	md, _ := decodeObject(o.Metadata)
	if md == nil {
		md = map[string]any{}
	}
	m := map[string]any{"id": o.ID, "name": o.Name, "metadata": md}
	if o.Free != nil {
		m["free"] = *o.Free
	}
	return m
}

// identity decodes "<platform> <base64 JSON>"; value is empty when the
// header has none or it does not decode.
func identity(h string) map[string]any {
	platform, enc, _ := strings.Cut(strings.TrimSpace(h), " ")
	m := map[string]any{"platform": platform, "value": map[string]any{}}
	if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc)); err == nil {
		if v, _ := decodeObject(raw); v != nil {
			m["value"] = v
		}
	}
	return m
}

// decodeObject decodes a JSON object, integral numbers as int64; nil for
// anything else.
func decodeObject(b []byte) (map[string]any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	m, _ := numbers(v).(map[string]any)
	return m, nil
}

// numbers replaces each json.Number in v by an int64 when integral, else a
// float64.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}
