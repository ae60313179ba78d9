package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// TestQuotaHeldThroughTheShim: a provision the async shim answers 202 for
// keeps its quota's lock until its broker call has ended and the instance
// is recorded, not only until the 202: a second provision against a quota
// of 1 waits meanwhile, then counts the first instance and is refused,
// never reaching the broker. (It used to pass with the 202, count nothing,
// and reach the broker: two instances under a quota of one.)
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
	if l := e.lock(t, store.LockKey("quota:t1", "one")); l.Key == "" {
		t.Error("the quota's lock was released with the 202, before the broker call ended")
	}
	second := e.send(t, "PUT", "/v2/service_instances/held2?accepts_incomplete=true", "2.15", shimProvision)
	release() // the first's broker call ends; its record is written, then the quota's lock released
	a := wait(t, second)
	if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `quota \"one\" of tenant \"t1\" is reached`) {
		t.Errorf("second provision: %d %s, want 422 naming the quota", a.status, a.body)
	}
	if n := e.broker.Count(samplebroker.EndpointProvision); n != 1 {
		t.Errorf("the broker got %d provisions, want 1", n)
	}
	e.waitShim(t, store.LockKey("b", "held1"), store.StateSucceeded)
}
