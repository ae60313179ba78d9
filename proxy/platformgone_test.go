package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// TestGonePlatformGetsNoDefault200: a poll whose platform went away while
// the broker worked is recorded as 499 and aborted (http.ErrAbortHandler:
// the server closes the connection without an answer), never finished
// with the server's default empty 200.
func TestGonePlatformGetsNoDefault200(t *testing.T) {
	arrived := make(chan struct{})
	b1 := osbtest.NewBroker(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	})
	g, _ := testGateway(t, strings.Replace(twoTenantYAML, "timeout: 300ms", "timeout: 30s", 1), env(b1.URL, b1.URL))
	ctx, cancel := context.WithCancel(t.Context())
	req := httptest.NewRequestWithContext(ctx, "GET", "/t1/b1/v2/service_instances/x/last_operation", nil)
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", "2.14")
	rec := httptest.NewRecorder()
	aborted := make(chan any, 1)
	go func() {
		defer func() { aborted <- recover() }()
		g.ServeHTTP(rec, req)
	}()
	<-arrived
	cancel()
	select {
	case v := <-aborted:
		if v != http.ErrAbortHandler {
			t.Fatalf("the gateway ended with %v, want the abort (http.ErrAbortHandler)", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call went on after the platform went away")
	}
	if rec.Body.Len() != 0 || rec.Flushed {
		t.Errorf("the gone platform was written %q", rec.Body.String())
	}
}

// brokenFlushWriter takes an answer's bytes, but its flush fails: the
// platform's connection broke as the answer went out.
type brokenFlushWriter struct {
	h    http.Header
	code int
	body strings.Builder
}

func (w *brokenFlushWriter) Header() http.Header         { return w.h }
func (w *brokenFlushWriter) WriteHeader(code int)        { w.code = code }
func (w *brokenFlushWriter) Write(p []byte) (int, error) { return w.body.Write(p) }
func (w *brokenFlushWriter) FlushError() error           { return syscall.EPIPE }

// TestUndeliveredSuccessIsAnOrphan: a 201 whose write fails is a success
// the platform did not get: an orphan candidate, noted before the lock is
// released, and the inventory does not keep what it made.
func TestUndeliveredSuccessIsAnOrphan(t *testing.T) {
	e := newGuardEnv(t, nil, "blocking", "false")
	w := provisionUndelivered(e, "/t1/b/v2/service_instances/i1", syncProvision())
	if w.code != http.StatusCreated {
		t.Fatalf("provision: %d %s", w.code, w.body.String())
	}
	orphans, err := e.g.guard.St.ListOrphans(context.Background())
	if err != nil || len(orphans) != 1 || orphans[0].InstanceID != "i1" ||
		!strings.Contains(orphans[0].Reason, "the platform went away before the answer reached it") {
		t.Fatalf("orphans %+v (%v), want the provision of i1 as a candidate", orphans, err)
	}
	if locks, _ := e.g.guard.St.List(context.Background(), store.ListFilter{}); len(locks) != 0 {
		t.Errorf("locks left: %+v", locks)
	}
	if _, err := e.g.guard.St.GetInstance(context.Background(), "b", "i1"); err == nil {
		t.Error("the inventory keeps the instance the platform never got")
	}
}

// TestDeliveredSuccessReleasesBeforeItsEnd: the lock of a provision whose
// success the platform must get is released before the answer's last
// byte leaves, so that the platform's next call never finds it held.
func TestDeliveredSuccessReleasesBeforeItsEnd(t *testing.T) {
	e := newGuardEnv(t, nil, "blocking", "false")
	for i := range 20 {
		path := "/v2/service_instances/d" + string(rune('a'+i))
		if code, body := e.call(t, "PUT", path, "2.15", syncProvision()); code != http.StatusCreated {
			t.Fatalf("provision: %d %s", code, body)
		}
		if locks, _ := e.g.guard.St.List(context.Background(), store.ListFilter{}); len(locks) != 0 {
			t.Fatalf("after the answer, locks %+v, want none", locks)
		}
		if code, body := e.call(t, "PATCH", path, "2.15", updateBody); code == http.StatusBadRequest || code == http.StatusUnprocessableEntity {
			t.Fatalf("an update right after the answer: %d %s", code, body)
		}
	}
}

// TestGonePlatformPutIsNot5xx: a provision whose platform is gone before
// the broker call (its context canceled: a reset) is aborted with 499 in
// the log, never answered 5xx for the canceled context (which would set
// off a platform's orphan mitigation, were anyone to read it).
func TestGonePlatformPutIsNot5xx(t *testing.T) {
	e := newGuardEnv(t, nil, "blocking", "false")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req := httptest.NewRequestWithContext(ctx, "PUT", "/t1/b/v2/service_instances/i1", strings.NewReader(syncProvision()))
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", "2.15")
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	var aborted any
	func() {
		defer func() { aborted = recover() }()
		e.g.ServeHTTP(rec, req)
	}()
	if aborted != http.ErrAbortHandler || rec.Body.Len() != 0 {
		t.Fatalf("ended with %v, wrote %d %q; want the abort and nothing written", aborted, rec.Code, rec.Body.String())
	}
	if n := e.broker.Counts()["provision"]; n != 0 {
		t.Errorf("the broker saw %d provisions, want none", n)
	}
	if locks, _ := e.g.guard.St.List(context.Background(), store.ListFilter{}); len(locks) != 0 {
		t.Errorf("locks left: %+v", locks)
	}
}

// TestUndeliveredAcceptedKeepsItsOperation: an async provision's 202 whose
// write fails is an orphan candidate, but its lock stays: it is the async
// operation the broker works on, and a deprovision (the orphan's, or the
// platform's) must not reach the broker during it.
func TestUndeliveredAcceptedKeepsItsOperation(t *testing.T) {
	e := newGuardEnv(t, nil, "blocking", "false")
	w := provisionUndelivered(e, "/t1/b/v2/service_instances/i1?accepts_incomplete=true", provisionBody(samplebroker.PlanAsyncID, ""))
	if w.code != http.StatusAccepted {
		t.Fatalf("provision: %d %s", w.code, w.body.String())
	}
	orphans, err := e.g.guard.St.ListOrphans(context.Background())
	if err != nil || len(orphans) != 1 || orphans[0].InstanceID != "i1" {
		t.Fatalf("orphans %+v (%v), want the provision of i1 as a candidate", orphans, err)
	}
	locks, _ := e.g.guard.St.List(context.Background(), store.ListFilter{})
	if len(locks) != 1 || !locks[0].Async || locks[0].InstanceID != "i1" {
		t.Fatalf("locks %+v, want the async provision of i1 kept", locks)
	}
	if code, body := e.call(t, "DELETE", "/v2/service_instances/i1?accepts_incomplete=true&service_id="+samplebroker.ServiceID+"&plan_id="+samplebroker.PlanAsyncID, "2.15", ""); code != http.StatusUnprocessableEntity && code != http.StatusBadRequest {
		t.Errorf("a deprovision during the async provision: %d %s, want it refused as in progress", code, body)
	}
}

// provisionUndelivered sends t1's provision to target through e's gateway
// into a writer whose flush fails, as to a platform gone once the answer
// is written.
func provisionUndelivered(e *guardEnv, target, body string) *brokenFlushWriter {
	req := httptest.NewRequest("PUT", target, strings.NewReader(body))
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", "2.15")
	req.Header.Set("Content-Type", "application/json")
	w := &brokenFlushWriter{h: http.Header{}}
	e.g.ServeHTTP(w, req)
	return w
}
