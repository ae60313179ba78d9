package rules

import (
	"encoding/json"
	"fmt"
)

// Advertise returns a catalog body in which every service says
// instances_retrievable: true, and every bindable service (or service with
// a bindable plan) bindings_retrievable: true: the catalog a platform sees
// when the gateway answers GET instance and GET binding for the broker
// (brokers[].emulate.advertise). Members keep their values; objects that
// change are re-encoded with their members in name order, and the catalog
// is otherwise as the broker sent it.
func Advertise(body []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, fmt.Errorf("catalog is not a JSON object: %w", err)
	}
	var services []map[string]json.RawMessage
	if err := json.Unmarshal(top["services"], &services); err != nil {
		return nil, fmt.Errorf("catalog services are not an array of objects: %w", err)
	}
	yes := json.RawMessage("true")
	for _, s := range services {
		s["instances_retrievable"] = yes
		if bindableService(s) {
			s["bindings_retrievable"] = yes
		}
	}
	raw, err := json.Marshal(services)
	if err != nil {
		return nil, err
	}
	top["services"] = raw
	return json.Marshal(top)
}

// bindableService reports whether a service (as raw members) or one of its
// plans is bindable.
func bindableService(s map[string]json.RawMessage) bool {
	var b bool
	if json.Unmarshal(s["bindable"], &b) == nil && b {
		return true
	}
	var plans []struct {
		Bindable *bool `json:"bindable"`
	}
	_ = json.Unmarshal(s["plans"], &plans)
	for _, p := range plans {
		if p.Bindable != nil && *p.Bindable {
			return true
		}
	}
	return false
}
