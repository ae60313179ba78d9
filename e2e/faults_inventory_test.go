package e2e

import (
	"context"
	"fmt"
	"net/url"
	"slices"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// faultBroker is the name of the fault table's one broker.
const faultBroker = "b"

// inventory is the gateway's inventory of the broker, for state.inventory:
// "instance <id> <state>" and "binding <id>/<binding id> <state>", the
// state its last operation's (store.StateSucceeded, StateInProgress,
// StateFailed; "none" for a record without one), sorted. It reads
// f.stores[0] for the in-process gateways, the admin API for the process.
// In process, bindings recorded without their instance (which no listing
// by instance finds) are counted against store.CountBindings and show as
// "bindings without their instance: <n>".
func (f *faultEnv) inventory() ([]string, error) {
	var (
		out []string
		err error
	)
	if f.proc != nil {
		out, err = f.proc.inventory()
	} else {
		out, err = storeInventory(f.stores[0])
	}
	slices.Sort(out)
	return out, err
}

// storeInventory reads the inventory of faultBroker from st.
func storeInventory(st store.Store) ([]string, error) {
	ctx := context.Background()
	var out []string
	bindings := 0
	for cursor := ""; ; {
		page, next, err := st.ListInstances(ctx, store.InstanceFilter{Broker: faultBroker}, cursor, store.MaxListLimit)
		if err != nil {
			return nil, err
		}
		for _, in := range page {
			out = append(out, inventoryLine("instance", in.InstanceID, in.LastOperation))
			bs, err := st.ListBindings(ctx, faultBroker, in.InstanceID)
			if err != nil {
				return nil, err
			}
			for _, b := range bs {
				out = append(out, inventoryLine("binding", b.InstanceID+"/"+b.BindingID, b.LastOperation))
			}
			bindings += len(bs)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	n, err := st.CountBindings(ctx, faultBroker)
	if err != nil {
		return nil, err
	}
	if n > bindings {
		out = append(out, fmt.Sprintf("bindings without their instance: %d", n-bindings))
	}
	return out, nil
}

// inventory reads the inventory of faultBroker through the admin API
// (GET /admin/instances, then GET /admin/instances/{broker}/{instance}).
func (p *gatewayProc) inventory() ([]string, error) {
	var out []string
	for cursor := ""; ; {
		var page struct {
			Instances  []store.Instance
			NextCursor string `json:"next_cursor"`
		}
		q := url.Values{"broker": {faultBroker}, "limit": {fmt.Sprint(store.MaxListLimit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if err := p.admin("/admin/instances?"+q.Encode(), &page); err != nil {
			return nil, err
		}
		for _, in := range page.Instances {
			out = append(out, inventoryLine("instance", in.InstanceID, in.LastOperation))
			var one struct{ Bindings []store.Binding }
			if err := p.admin("/admin/instances/"+faultBroker+"/"+url.PathEscape(in.InstanceID), &one); err != nil {
				return nil, err
			}
			for _, b := range one.Bindings {
				out = append(out, inventoryLine("binding", b.InstanceID+"/"+b.BindingID, b.LastOperation))
			}
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
}

// inventoryLine is one record of state.inventory.
func inventoryLine(what, id string, op store.LastOperation) string {
	st := op.State
	if st == "" {
		st = "none"
	}
	return what + " " + id + " " + st
}
