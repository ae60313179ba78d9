package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy/internal/emulate"
)

// TestIdenticalRepeatInFlightSharesTheAnswer: a platform that repeats a
// provision while the first is still at the broker gets the first one's
// answer; the broker sees one call. A repeat with another body is not
// identical: the guard blocks it as before.
func TestIdenticalRepeatInFlightSharesTheAnswer(t *testing.T) {
	entered, release := make(chan struct{}, 4), make(chan struct{})
	e := newFaultEnv(t, faultSetup{timeout: "1m", wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut {
				entered <- struct{}{}
				<-release
			}
			h.ServeHTTP(w, r)
		})
	}})
	url := e.gw.URL + "/t1/b/v2/service_instances/i-1"
	send := func(body string) <-chan *http.Response {
		out := make(chan *http.Response, 1)
		req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
		req.SetBasicAuth(t1User, t1Pass)
		req.Header.Set("X-Broker-API-Version", "2.15")
		go func() {
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				close(out)
				return
			}
			out <- res
		}()
		return out
	}
	first := send(syncProvisionBody)
	<-entered
	second := send(syncProvisionBody)
	// Wait until the repeat waits on the flight.
	deadline := time.Now().Add(10 * time.Second)
	for waiters(e.g.flights) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the repeat never joined the flight")
		}
		time.Sleep(time.Millisecond)
	}
	other := send(provisionBody(samplebroker.PlanSyncID, `,"parameters":{"x":1}`))
	res := <-other
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("a different provision of the same instance: %d, want 400 (in progress)", res.StatusCode)
	}
	res.Body.Close()
	close(release)
	r1, r2 := <-first, <-second
	b1, _ := io.ReadAll(r1.Body)
	b2, _ := io.ReadAll(r2.Body)
	r1.Body.Close()
	r2.Body.Close()
	if r1.StatusCode != http.StatusCreated || r2.StatusCode != http.StatusCreated || string(b1) != string(b2) {
		t.Errorf("answers: %d %s and %d %s", r1.StatusCode, b1, r2.StatusCode, b2)
	}
	if r1.Header.Get("X-Broker-API-Request-Identity") == r2.Header.Get("X-Broker-API-Request-Identity") {
		t.Error("the repeat got the first call's request identity")
	}
	if n := e.broker.Count(samplebroker.EndpointProvision); n != 1 {
		t.Errorf("the broker got %d provisions, want 1", n)
	}
}

func waiters(f *emulate.Flights) int { return f.Waiters() }
