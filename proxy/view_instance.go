package proxy

import (
	"context"
	"encoding/json"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// One instance's story, for the operator's surface: its locks (its own
// and its bindings'), and the names its platform gave it.

// InstanceOperations returns the locks of one instance of broker (its own
// and its bindings'), oldest first.
func (v *View) InstanceOperations(ctx context.Context, broker, instance string) ([]Operation, error) {
	return v.operations(ctx, store.ListFilter{Broker: broker, InstanceID: instance})
}

// PlatformNames are the names a platform gave an instance and where it
// lives, as its context object says (Cloud Foundry's organization_name,
// space_name and instance_name; Kubernetes' namespace and
// instance_name): what a person knows it by. Empty where the context
// says nothing.
type PlatformNames struct {
	Organization, Space, Instance string
}

// NamesOf reads the PlatformNames of a context object (store.Instance's
// Context).
func NamesOf(contextObject json.RawMessage) PlatformNames {
	var c struct {
		Org       string `json:"organization_name"`
		Space     string `json:"space_name"`
		Instance  string `json:"instance_name"`
		Namespace string `json:"namespace"`
	}
	if len(contextObject) == 0 || json.Unmarshal(contextObject, &c) != nil {
		return PlatformNames{}
	}
	n := PlatformNames{Organization: c.Org, Space: c.Space, Instance: c.Instance}
	if n.Space == "" {
		n.Space = c.Namespace
	}
	return n
}

// PlacesOf returns the PlatformNames of instances of the inventory (keyed
// by broker and instance id), for the tables that list what locks and
// orphans name; an instance the inventory does not hold, or a store that
// does not answer, has none (the tables show ids alone).
func (v *View) PlacesOf(ctx context.Context, keys [][2]string) map[[2]string]PlatformNames {
	st := v.sw.Load().guard.St
	out := make(map[[2]string]PlatformNames, len(keys))
	for _, k := range keys {
		if _, done := out[k]; done {
			continue
		}
		in, err := st.GetInstance(ctx, k[0], k[1])
		if err != nil {
			out[k] = PlatformNames{}
			continue
		}
		out[k] = NamesOf(in.Context)
	}
	return out
}
