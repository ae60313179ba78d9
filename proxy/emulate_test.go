package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// unreadableInventory is a store whose inventory reads fail while broken
// is set; its locks keep working.
type unreadableInventory struct {
	store.Store
	broken atomic.Bool
}

func (u *unreadableInventory) GetInstance(ctx context.Context, broker, id string) (store.Instance, error) {
	if u.broken.Load() {
		return store.Instance{}, fmt.Errorf("%w: injected: inventory read failed", store.ErrUnavailable)
	}
	return u.Store.GetInstance(ctx, broker, id)
}

func (u *unreadableInventory) GetBinding(ctx context.Context, broker, id, binding string) (store.Binding, error) {
	if u.broken.Load() {
		return store.Binding{}, fmt.Errorf("%w: injected: inventory read failed", store.ErrUnavailable)
	}
	return u.Store.GetBinding(ctx, broker, id, binding)
}

// TestEmulationUnavailableWithoutItsInventory: when the inventory cannot
// be read, every emulation that needs it (fetch, idempotent repeats,
// gone) answers 503 naming the inventory, never the store's error, sends
// nothing to the broker, and leaves no lock behind: once the inventory is
// back, the same calls get their emulated answers.
func TestEmulationUnavailableWithoutItsInventory(t *testing.T) {
	var inv *unreadableInventory
	e := newInvEnvStore(t, samplebroker.Options{Legacy: true, Lax: true}, "2.8",
		"    inventory: {secrets: encrypted}\n    emulate: {fetch: true, idempotent: true, gone: true}",
		slog.New(slog.DiscardHandler), func(st store.Store) store.Store {
			inv = &unreadableInventory{Store: st}
			return inv
		})
	const path = "/v2/service_instances/i-1"
	const bpath = path + "/service_bindings/bd-1"
	if st, b := e.call(t, "2.15", "PUT", path, invProvision); st != http.StatusCreated {
		t.Fatalf("provision: %d %s", st, b)
	}
	if st, b := e.call(t, "2.15", "PUT", bpath, invBind); st != http.StatusCreated {
		t.Fatalf("bind: %d %s", st, b)
	}
	calls := func() int64 {
		var n int64
		for _, ep := range []string{samplebroker.EndpointProvision, samplebroker.EndpointBind,
			samplebroker.EndpointDeprovision, samplebroker.EndpointUnbind} {
			n += e.broker.Count(ep)
		}
		return n
	}
	before := calls()

	inv.broken.Store(true)
	tests := []struct{ name, method, path, body string }{
		{"GET instance (fetch)", "GET", path, ""},
		{"GET binding (fetch)", "GET", bpath, ""},
		{"repeated provision (idempotent)", "PUT", path, invProvision},
		{"repeated bind (idempotent)", "PUT", bpath, invBind},
		{"deprovision of an unknown instance (gone)", "DELETE", "/v2/service_instances/i-2" + invQuery, ""},
	}
	for _, tc := range tests {
		st, b := e.call(t, "2.17", tc.method, tc.path, tc.body)
		if st != http.StatusServiceUnavailable || !strings.Contains(b, `"description":"the gateway's inventory is unavailable`) {
			t.Errorf("%s with the inventory unreadable: %d %s, want 503 naming the inventory", tc.name, st, b)
		}
		if strings.Contains(b, "injected") {
			t.Errorf("%s: the answer shows the store's error: %s", tc.name, b)
		}
	}
	if n := calls() - before; n != 0 {
		t.Errorf("the broker got %d calls while the inventory was unreadable, want none", n)
	}

	inv.broken.Store(false)
	for _, tc := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"GET instance", "GET", path, "", http.StatusOK},
		{"repeated provision", "PUT", path, invProvision, http.StatusOK},
		{"repeated bind", "PUT", bpath, invBind, http.StatusOK},
		{"deprovision of an unknown instance", "DELETE", "/v2/service_instances/i-2" + invQuery, "", http.StatusGone},
	} {
		if st, b := e.call(t, "2.17", tc.method, tc.path, tc.body); st != tc.want {
			t.Errorf("%s once the inventory is back: %d %s, want %d (no lock left behind)", tc.name, st, b, tc.want)
		}
	}
}

// TestEmulatedFetchAtABrokerThatCannotFetch: a 2.17 broker whose catalog
// says instances_retrievable and bindings_retrievable false. GET instance
// and GET binding are answered from the inventory, 404 for what the
// gateway never saw or saw deleted, 503 while the inventory cannot be
// read; none reaches the broker. The same broker with a catalog that says
// both are retrievable gets every fetch, of what the gateway never saw
// too.
func TestEmulatedFetchAtABrokerThatCannotFetch(t *testing.T) {
	var inv *unreadableInventory
	e := newInvEnvStore(t, samplebroker.Options{NotRetrievable: true}, "2.17", "    emulate: {fetch: true, gone: true}",
		slog.New(slog.DiscardHandler), func(st store.Store) store.Store {
			inv = &unreadableInventory{Store: st}
			return inv
		})
	const path = "/v2/service_instances/i-1"
	const bpath = path + "/service_bindings/bd-1"
	if st, b := e.call(t, "2.17", "PUT", path, invProvision); st != http.StatusCreated {
		t.Fatalf("provision: %d %s", st, b)
	}
	if st, b := e.call(t, "2.17", "PUT", bpath, invBind); st != http.StatusCreated {
		t.Fatalf("bind: %d %s", st, b)
	}
	steps := []struct {
		name, method, path string
		want               int
		desc               string
	}{
		{"GET instance", "GET", path, http.StatusOK, ""},
		{"GET binding", "GET", bpath, http.StatusOK, ""},
		{"GET instance never seen", "GET", "/v2/service_instances/i-2", http.StatusNotFound, `never saw service instance "i-2" provisioned at broker "b", or saw it deprovisioned`},
		{"GET instance never seen, service_id in the query", "GET", "/v2/service_instances/i-2" + invQuery, http.StatusNotFound, `never saw service instance "i-2"`},
		{"GET binding never seen", "GET", path + "/service_bindings/bd-2", http.StatusNotFound, `never saw service binding "bd-2" of instance "i-1" made at broker "b", or saw it unbound`},
		{"GET binding of an instance never seen", "GET", "/v2/service_instances/i-2/service_bindings/bd-1", http.StatusNotFound, `never saw service binding "bd-1" of instance "i-2"`},
		{"unbind", "DELETE", bpath + invQuery, http.StatusOK, ""},
		{"GET binding after unbind", "GET", bpath, http.StatusNotFound, `never saw service binding "bd-1" of instance "i-1" made at broker "b", or saw it unbound`},
		{"deprovision", "DELETE", path + invQuery, http.StatusOK, ""},
		{"GET instance after deprovision", "GET", path, http.StatusNotFound, `never saw service instance "i-1" provisioned at broker "b", or saw it deprovisioned`},
	}
	for _, s := range steps {
		st, b := e.call(t, "2.17", s.method, s.path, "")
		var body struct{ Description string }
		_ = json.Unmarshal([]byte(b), &body)
		if st != s.want || !strings.Contains(body.Description, s.desc) {
			t.Errorf("%s: %d %s, want %d with %q", s.name, st, b, s.want, s.desc)
		}
	}
	inv.broken.Store(true)
	for _, p := range []string{path, "/v2/service_instances/i-3", bpath} {
		if st, b := e.call(t, "2.17", "GET", p, ""); st != http.StatusServiceUnavailable || !strings.Contains(b, "inventory is unavailable") {
			t.Errorf("GET %s with the inventory unreadable: %d %s, want 503 naming the inventory", p, st, b)
		}
	}
	inv.broken.Store(false)
	if n := e.broker.Count(samplebroker.EndpointGetInstance) + e.broker.Count(samplebroker.EndpointGetBinding); n != 0 {
		t.Errorf("the broker got %d fetches, want none (its catalog says it cannot answer them)", n)
	}

	t.Run("a broker that can fetch", func(t *testing.T) {
		e := newInvEnv(t, samplebroker.Options{}, "2.17", "    emulate: {fetch: true, gone: true}")
		if st, b := e.call(t, "2.17", "GET", "/v2/service_instances/i-2", ""); st != http.StatusNotFound || strings.Contains(b, "never saw") {
			t.Errorf("GET instance never seen: %d %s, want the broker's 404", st, b)
		}
		if st, b := e.call(t, "2.17", "PUT", path, invProvision); st != http.StatusCreated {
			t.Fatalf("provision: %d %s", st, b)
		}
		if st, b := e.call(t, "2.17", "GET", path, ""); st != http.StatusOK {
			t.Errorf("GET instance: %d %s, want the broker's 200", st, b)
		}
		if n := e.broker.Count(samplebroker.EndpointGetInstance); n != 2 {
			t.Errorf("the broker got %d GET instance calls, want 2", n)
		}
	})
}
