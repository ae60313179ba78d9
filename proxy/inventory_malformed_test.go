package proxy

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// TestInvalid2xxIsNotRecordedAsLive: with validation.responses: report, a
// success whose body is no JSON object (invalid JSON, as overview-broker's
// 200invalidjson, an empty body, an array) passes through to the platform
// but changes nothing in the inventory: a provision or bind is not
// recorded as live, an update does not replace the recorded state, a 202
// records no operation in progress, a deprovision or unbind does not
// remove the record. A well-formed success that breaks another rule (a
// dashboard_url that is no string) is recorded: the platform reads it as
// the success its status says. (A malformed 202 keeps the instance locked
// as an operation in progress, as before: the lock is not the inventory.)
func TestInvalid2xxIsNotRecordedAsLive(t *testing.T) {
	const (
		instance = "/v2/service_instances/"
		asyncQ   = "?accepts_incomplete=true"
		update   = `{"service_id":"` + samplebroker.ServiceID + `","parameters":{"size":"large"}}`
	)
	malformed := []struct{ name, body string }{
		{"invalid JSON", `{"dashboard_url":`},
		{"empty", ""},
		{"an array", `[]`},
	}
	for _, m := range malformed {
		t.Run(m.name, func(t *testing.T) {
			e := newInvEnv(t, samplebroker.Options{}, "2.17", "    validation: {responses: report}")
			fault := func(endpoint string, status int) {
				t.Helper()
				body := m.body
				if body == "" {
					body = " " // Fault.Body "" would write an OSB error body
				}
				if err := e.broker.InjectFault(samplebroker.Fault{Endpoint: endpoint, Status: status, Body: body, Count: 1}); err != nil {
					t.Fatal(err)
				}
			}
			call := func(what string, want int, method, path, body string) {
				t.Helper()
				if st, b := e.call(t, "2.17", method, path, body); st != want {
					t.Fatalf("%s: %d %s, want the broker's %d passed through", what, st, b, want)
				}
			}
			for _, status := range []int{http.StatusOK, http.StatusCreated, http.StatusAccepted} {
				fault(samplebroker.EndpointProvision, status)
				call("provision", status, "PUT", instance+"p"+asyncQ, invProvision)
				if in, err := e.st.GetInstance(context.Background(), "b", "p"); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("a malformed %d to a provision: the inventory holds %+v (%v), want nothing", status, in.LastOperation, err)
				}
			}

			call("provision", http.StatusCreated, "PUT", instance+"i", invProvision)
			call("bind", http.StatusCreated, "PUT", instance+"i/service_bindings/ok", invBind)
			want := e.record(t, "i")
			fault(samplebroker.EndpointUpdate, http.StatusOK)
			call("update", http.StatusOK, "PATCH", instance+"i", update)
			fault(samplebroker.EndpointDeprovision, http.StatusOK)
			call("deprovision", http.StatusOK, "DELETE", instance+"i"+invQuery, "")
			if got := e.record(t, "i"); got != want {
				t.Errorf("malformed answers to an update and a deprovision left %+v, want the record unchanged: %+v", got, want)
			}

			fault(samplebroker.EndpointBind, http.StatusCreated)
			call("bind", http.StatusCreated, "PUT", instance+"i/service_bindings/k", invBind)
			if _, err := e.st.GetBinding(context.Background(), "b", "i", "k"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a malformed 201 to a bind: the binding is recorded (%v), want nothing", err)
			}
			fault(samplebroker.EndpointUnbind, http.StatusOK)
			call("unbind", http.StatusOK, "DELETE", instance+"i/service_bindings/ok"+invQuery, "")
			if _, err := e.st.GetBinding(context.Background(), "b", "i", "ok"); err != nil {
				t.Errorf("a malformed 200 to an unbind removed the binding's record (%v), want it kept", err)
			}
			fault(samplebroker.EndpointUpdate, http.StatusAccepted) // last: the 202 keeps the instance locked
			call("async update", http.StatusAccepted, "PATCH", instance+"i"+asyncQ, update)
			if got := e.record(t, "i"); got != want {
				t.Errorf("a malformed 202 to an update left %+v, want the record unchanged: %+v", got, want)
			}
		})
	}

	t.Run("well-formed with another rule broken", func(t *testing.T) {
		e := newInvEnv(t, samplebroker.Options{}, "2.17", "    validation: {responses: report}")
		if err := e.broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Status: http.StatusCreated, Body: `{"dashboard_url":7}`, Count: 1}); err != nil {
			t.Fatal(err)
		}
		if st, b := e.call(t, "2.17", "PUT", instance+"i", invProvision); st != http.StatusCreated {
			t.Fatalf("provision: %d %s, want the broker's 201 passed through", st, b)
		}
		if got := e.record(t, "i"); got.Kind != store.KindProvision || got.State != store.StateSucceeded {
			t.Errorf("the inventory holds %+v, want the provision succeeded", got)
		}
	})
}

// record is the last operation of instance id in the inventory.
func (e *invEnv) record(t *testing.T, id string) store.LastOperation {
	t.Helper()
	in, err := e.st.GetInstance(context.Background(), "b", id)
	if err != nil {
		t.Fatalf("instance %q in the inventory: %v", id, err)
	}
	return in.LastOperation
}
