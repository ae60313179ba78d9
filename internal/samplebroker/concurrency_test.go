package samplebroker

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
)

// TestConcurrentRequests drives many goroutines against shared and separate
// instances; -race checks the locking, the counts check that every request
// was served exactly once.
func TestConcurrentRequests(t *testing.T) {
	f := newFixture(t, Options{})
	const workers, rounds = 16, 10
	shared := "shared"
	f.must(provisionAsync(shared), 202)

	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				own := fmt.Sprintf("inst-%d-%d", w, i)
				steps := []struct {
					rq   req
					want []int
				}{
					{provisionSync(own), []int{201}},
					// An identical repeat: 202 while in progress, 200 once the
					// clock has moved.
					{provisionAsync(shared), []int{202, 200}},
					{lastOp(shared), []int{200}},
					{req{method: "GET", path: "/v2/catalog"}, []int{200}},
					{req{method: "PUT", path: bindingPath(own, "b"), body: bindBody(ServiceID, PlanSyncID, "")}, []int{201}},
					{req{method: "GET", path: bindingPath(own, "b")}, []int{200}},
					{req{method: "DELETE", path: bindingPath(own, "b") + query(ServiceID, PlanSyncID)}, []int{200}},
					{req{method: "DELETE", path: instancePath(own) + query(ServiceID, PlanSyncID)}, []int{200}},
				}
				for _, s := range steps {
					if r := f.do(s.rq); !slices.Contains(s.want, r.status) {
						errs <- fmt.Errorf("%s %s: %d, want %v: %s", s.rq.method, s.rq.path, r.status, s.want, r.body)
					}
				}
				if i == rounds/2 && w == 0 {
					f.clock.Advance(DefaultAsyncDelay) // completes while others poll
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, want := f.b.Count(EndpointBind), int64(workers*rounds); got != want {
		t.Errorf("Count(bind) = %d, want %d", got, want)
	}
	if got, want := f.b.Count(EndpointProvision), int64(2*workers*rounds+1); got != want {
		t.Errorf("Count(provision) = %d, want %d", got, want)
	}
	if state := f.state(t, lastOp(shared)); state != "succeeded" {
		t.Errorf("shared instance: state %q", state)
	}
	f.must(req{method: "GET", path: instancePath(shared)}, http.StatusOK)
}
