package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// TestQuotaHeldThroughTheShim: a provision the async shim answers 202 for
// counts against its quota until its broker call has ended and the
// instance is recorded, not only until the 202: a second provision against
// a quota of 1, sent while the first's call is at the broker, is refused
// (the first counted in flight, by its operation lock), and so is a third
// once the first is recorded; neither reaches the broker. The quota's own
// lock is not held over the broker call: only the count and the admission.
// (It used to pass with the 202, count nothing, and reach the broker: two
// instances under a quota of one.)
func TestQuotaHeldThroughTheShim(t *testing.T) {
	e := newShimEnv(t, shimOptions{quotas: "    quotas: [{name: one, max_instances: 1}]"})
	t.Cleanup(func() { // a provision that got past the quota (the bug) must not hold the servers' close
		for {
			select {
			case c := <-e.broker.arrived:
				close(c.release)
			default:
				return
			}
		}
	})
	first := e.send(t, "PUT", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", shimProvision)
	release := e.held(t).releaser(t)
	e.fire(t)
	if a := wait(t, first); a.status != http.StatusAccepted {
		t.Fatalf("first provision: %d %s, want the shim's 202", a.status, a.body)
	}
	if l := e.lock(t, store.LockKey("quota:t1", "one")); l.Key != "" {
		t.Errorf("the quota's lock is held over the broker call: %+v", l)
	}
	refused := func(what string, a reply, inFlight bool) {
		t.Helper()
		want := `quota \"one\" of tenant \"t1\" is reached: it admits 1 service instances and the tenant holds 1`
		if inFlight {
			want += " (1 of them still being provisioned"
		} else {
			want += ";"
		}
		if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, want) {
			t.Errorf("%s: %d %s, want 422 with %s", what, a.status, a.body, want)
		}
	}
	refused("second provision, the first at the broker", wait(t, e.send(t, "PUT", "/v2/service_instances/held2?accepts_incomplete=true", "2.15", shimProvision)), true)
	release() // the first's broker call ends; its record is written
	e.waitShim(t, store.LockKey("b", "held1"), store.StateSucceeded)
	refused("third provision, the first recorded", wait(t, e.send(t, "PUT", "/v2/service_instances/held3?accepts_incomplete=true", "2.15", shimProvision)), false)
	if n := e.broker.Count(samplebroker.EndpointProvision); n != 1 {
		t.Errorf("the broker got %d provisions, want 1", n)
	}
}
