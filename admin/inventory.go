package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// The inventory's admin routes. Their answers show every field of a
// record but its sealed secrets: in place of sealed parameters and
// credentials they say whether some are stored (parameters_stored,
// credentials_stored), never the sealed bytes, not even in base64.

// instanceView is an instance as the admin routes show it.
type instanceView struct {
	store.Instance
	// ParametersStored says whether sealed parameters are kept.
	ParametersStored bool `json:"parameters_stored"`
}

// bindingView is a binding as the admin routes show it.
type bindingView struct {
	store.Binding
	// ParametersStored and CredentialsStored say whether sealed
	// parameters and credentials are kept.
	ParametersStored  bool `json:"parameters_stored"`
	CredentialsStored bool `json:"credentials_stored"`
	// ExpiresInSeconds is the time left to ExpiresAt (negative once past;
	// only in the expiring list).
	ExpiresInSeconds *float64 `json:"expires_in_seconds,omitempty"`
}

// viewInstance is in as the admin routes show it.
func viewInstance(in proxy.StoredInstance) instanceView {
	return instanceView{Instance: in.Record, ParametersStored: in.ParametersStored}
}

// viewBinding is b as the admin routes show it.
func viewBinding(b proxy.StoredBinding) bindingView {
	return bindingView{Binding: b.Record, ParametersStored: b.ParametersStored, CredentialsStored: b.CredentialsStored}
}

// mountInventory adds the inventory routes:
//
//	GET /admin/instances?broker=&tenant=&cursor=&limit=  a page of instances, the next cursor and the total
//	GET /admin/instances/{broker}/{instance}             one instance and its bindings
//	GET /admin/bindings/expiring?within=&broker=&limit=  bindings whose expires_at falls within inventory.expiry_warning (or within)
func (a *Admin) mountInventory() {
	a.handle("GET /admin/instances", listInstances)
	a.handle("GET /admin/instances/{broker}/{instance}", getInstance)
	a.handle("GET /admin/bindings/expiring", listExpiring)
}

// queryLimit reads ?limit= (0 when absent: the store's default).
func queryLimit(r *http.Request) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, osb.Errorf(http.StatusBadRequest, "", "limit must be a whole number of at least 1 (at most %d are returned), got %q",
			store.MaxListLimit, s)
	}
	return n, nil
}

// inventoryError is the answer to a store error of an inventory route: 400
// for arguments the store refused, else storeError.
func inventoryError(what string, err error) error {
	if errors.Is(err, store.ErrInvalid) {
		return &osb.Error{Status: http.StatusBadRequest, Err: err,
			Description: what + ": " + strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": ")}
	}
	return storeError(what, err)
}

func listInstances(r *http.Request, v *proxy.View) (any, string, error) {
	q := r.URL.Query()
	limit, err := queryLimit(r)
	if err != nil {
		return nil, "", err
	}
	f := store.InstanceFilter{Broker: q.Get("broker"), Tenant: q.Get("tenant")}
	page, next, err := v.ListInstances(r.Context(), f, q.Get("cursor"), limit)
	if err != nil {
		what := "listing the instances"
		if q.Get("cursor") != "" {
			what = "listing the instances after a cursor (the next_cursor of an earlier page)"
		}
		return nil, "", inventoryError(what, err)
	}
	total, err := v.CountInstances(r.Context(), f)
	if err != nil {
		return nil, "", storeError("counting the instances", err)
	}
	out := make([]instanceView, 0, len(page))
	for _, in := range page {
		out = append(out, viewInstance(in))
	}
	return map[string]any{"instances": out, "next_cursor": next, "total": total},
		fmt.Sprintf("listed %d of %d instances (broker %q, tenant %q)", len(out), total, f.Broker, f.Tenant), nil
}

func getInstance(r *http.Request, v *proxy.View) (any, string, error) {
	broker, id := r.PathValue("broker"), r.PathValue("instance")
	in, err := v.GetInstance(r.Context(), broker, id)
	found := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, "", inventoryError("reading the instance", err)
	}
	bindings, err := v.ListBindings(r.Context(), broker, id)
	if err != nil {
		return nil, "", inventoryError("reading the instance's bindings", err)
	}
	if !found && len(bindings) == 0 {
		return nil, "", osb.Errorf(http.StatusNotFound, "", "no instance %q of broker %q in the inventory: the gateway never saw it succeed, or saw it deleted", id, broker)
	}
	views := make([]bindingView, 0, len(bindings))
	for _, b := range bindings {
		views = append(views, viewBinding(b))
	}
	// Bindings without their instance: a bind on an instance the gateway
	// never recorded (provisioned before it kept an inventory).
	var inst *instanceView
	if found {
		v := viewInstance(in)
		inst = &v
	}
	return map[string]any{"instance": inst, "bindings": views},
		fmt.Sprintf("read instance %q of broker %q (recorded %t) and its %d bindings", id, broker, found, len(views)), nil
}

func listExpiring(r *http.Request, v *proxy.View) (any, string, error) {
	q := r.URL.Query()
	within := v.ExpiryWarning()
	if s := q.Get("within"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return nil, "", osb.Errorf(http.StatusBadRequest, "", "within must be a duration of zero or more such as 72h or 30m, got %q", s)
		}
		within = d
	}
	limit, err := queryLimit(r)
	if err != nil {
		return nil, "", err
	}
	broker, now := q.Get("broker"), v.Now()
	before := now.Add(within)
	found, err := v.ExpiringBindings(r.Context(), broker, before, limit)
	if err != nil {
		return nil, "", inventoryError("listing the expiring bindings", err)
	}
	counts, err := v.CountExpiring(r.Context(), before)
	if err != nil {
		return nil, "", storeError("counting the expiring bindings", err)
	}
	total := counts[broker]
	if broker == "" {
		total = 0
		for _, n := range counts {
			total += n
		}
	}
	out := make([]bindingView, 0, len(found))
	for _, b := range found {
		v := viewBinding(b)
		left := b.Record.ExpiresAt.Sub(now).Seconds()
		v.ExpiresInSeconds = &left
		out = append(out, v)
	}
	return map[string]any{"bindings": out, "total": total, "truncated": total > len(out),
			"within_seconds": within.Seconds(), "before": before.UTC()},
		fmt.Sprintf("listed %d of %d bindings expiring within %s (broker %q)", len(out), total, within, broker), nil
}
