package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	gwosb "github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// The rows of an operator's reconcile (proxy.Gateway.Reconcile, POST
// /admin/operations/{broker}/{instance}/reconcile): the gateway polls the
// broker's last_operation itself and settles the lock by the answer.
func init() { faultTable = append(faultTable, reconcileRows...) }

// reconcileI is the reconcile of instance i's operation an operator asks for.
var reconcileI = proxy.ReconcileRequest{Broker: "b", InstanceID: "i", Who: "fault-table"}

var reconcileRows = []faultRow{
	{
		// The broker is down when the operator reconciles: 502 naming the
		// failed poll, the lock stays (nothing is known of the operation),
		// and the next reconcile, the broker back, settles it.
		name: "reconcile: the broker is down",
		steps: []faultStep{
			{call: provisionAsync,
				want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: deprovisionAsync, arm: all(refuseNext, reconciled(reconcileI, proxy.OutcomePollFailed, http.StatusBadGateway)),
				want: state{saw: saw{400, proxy.InProgress}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
		},
		retried: []faultStep{{call: deprovisionAsync, arm: reconciled(reconcileI, proxy.OutcomeSettledSucceeded, 0),
			want: state{saw: saw{202, ""}, locks: []string{"b/i deprovision async"},
				calls: calls{"provision": 1, "instance_last_operation": 1, "deprovision": 1}}}},
	},
	{
		// The broker answers 410 Gone to the poll of a deprovision: the
		// instance is gone, as a platform's poll would take it: the lock is
		// released and the inventory forgets the instance.
		name: "reconcile: 410 Gone to a deprovision's poll",
		steps: []faultStep{
			{call: provisionAsync,
				want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll,
				want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 1}, inventory: []string{"instance i succeeded"}}},
			{call: deprovisionAsync,
				want: state{saw: saw{202, ""}, locks: []string{"b/i deprovision async"},
					calls: calls{"provision": 1, "instance_last_operation": 1, "deprovision": 1}}},
		},
		retried: []faultStep{{call: provisionAsync,
			arm: all(inject(samplebroker.Fault{Endpoint: samplebroker.EndpointInstanceLastOperation, Status: http.StatusGone, Body: "{}", Count: 1}),
				reconciled(reconcileI, proxy.OutcomeGone, 0)),
			want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"},
				calls: calls{"provision": 2, "deprovision": 1, "instance_last_operation": 2}, inventory: []string{"instance i in progress"}}}},
	},
	{
		// The broker answers the poll with a body that is no JSON: no state
		// is read, so nothing ends; the lock stays for the next poll,
		// which the platform's settles.
		name: "reconcile: a garbage answer",
		steps: []faultStep{
			{call: provisionAsync,
				want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: deprovisionAsync,
				arm: all(inject(samplebroker.Fault{Endpoint: samplebroker.EndpointInstanceLastOperation, Body: "<html>upstream error</html>", Count: 1}),
					reconciled(reconcileI, proxy.OutcomeUnreadable, 0)),
				want: state{saw: saw{400, proxy.InProgress}, locks: []string{"b/i provision async"},
					calls: calls{"provision": 1, "instance_last_operation": 1}}},
		},
		retried: []faultStep{{call: poll,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 2}, inventory: []string{"instance i succeeded"}}}},
	},
	{
		// The platform polls while the operator's reconcile waits for the
		// broker: the platform's poll settles the operation first; the
		// reconcile's answer, read after, finds the lock gone and says so,
		// releasing nothing of another operation and recording the same
		// outcome once.
		name: "reconcile: the platform polls while it runs",
		steps: []faultStep{
			{call: provisionAsync,
				want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll, arm: heldReconcile.start, after: heldReconcile.finish(proxy.OutcomeSettledMeanwhile),
				want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 2}, inventory: []string{"instance i succeeded"}}},
		},
		retried: []faultStep{{call: deprovisionAsync,
			want: state{saw: saw{202, ""}, locks: []string{"b/i deprovision async"},
				calls: calls{"provision": 1, "instance_last_operation": 2, "deprovision": 1}}}},
	},
}

// all runs each of fs in turn.
func all(fs ...func(*testing.T, *faultEnv)) func(*testing.T, *faultEnv) {
	return func(t *testing.T, f *faultEnv) {
		for _, fn := range fs {
			fn(t, f)
		}
	}
}

// reconciled reconciles req on the first gateway and checks its outcome,
// and its error's status (0: none).
func reconciled(req proxy.ReconcileRequest, outcome string, status int) func(*testing.T, *faultEnv) {
	return func(t *testing.T, f *faultEnv) {
		t.Helper()
		res, err := f.gateways[0].Reconcile(context.Background(), req)
		checkReconciled(t, res, err, outcome, status)
	}
}

func checkReconciled(t *testing.T, res proxy.ReconcileResult, err error, outcome string, status int) {
	t.Helper()
	var e *gwosb.Error
	switch {
	case status != 0 && (!errors.As(err, &e) || e.Status != status):
		t.Errorf("reconcile: %+v, %v; want an error with status %d", res, err, status)
	case status == 0 && err != nil:
		t.Errorf("reconcile: %v; want outcome %q", err, outcome)
	case res.Outcome != outcome:
		t.Errorf("reconcile: outcome %q (%s), want %q", res.Outcome, res.Answer, outcome)
	}
}

// heldReconcile runs a reconcile whose poll the broker holds while the
// platform's step runs (start), then lets it go and checks its outcome
// (finish).
var heldReconcile = &reconcileGates{running: map[*faultEnv]*runningReconcile{}}

type reconcileGates struct {
	mu      sync.Mutex
	running map[*faultEnv]*runningReconcile
}

type runningReconcile struct {
	gate *gate
	done chan struct{}
	res  proxy.ReconcileResult
	err  error
}

// start holds the next last_operation at the broker, starts the
// reconcile and waits until its poll reached the broker: the platform's
// poll, sent next, passes it.
func (h *reconcileGates) start(t *testing.T, f *faultEnv) {
	r := &runningReconcile{gate: f.front.hold(samplebroker.EndpointInstanceLastOperation), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.res, r.err = f.gateways[0].Reconcile(context.Background(), reconcileI)
	}()
	await(t, r.gate.entered, "the reconcile's poll to reach the broker")
	h.mu.Lock()
	h.running[f] = r
	h.mu.Unlock()
}

// finish lets the held poll answer and checks the reconcile's outcome.
func (h *reconcileGates) finish(outcome string) func(*testing.T, *faultEnv) {
	return func(t *testing.T, f *faultEnv) {
		h.mu.Lock()
		r := h.running[f]
		delete(h.running, f)
		h.mu.Unlock()
		close(r.gate.proceed)
		await(t, r.done, "the reconcile to end")
		checkReconciled(t, r.res, r.err, outcome, 0)
	}
}

// records keeps the audit records a gateway writes.
type records struct {
	mu   sync.Mutex
	list []audit.Record
}

func (r *records) Write(rec *audit.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, *rec)
	return nil
}

// own returns the records of the gateway's own actions.
func (r *records) own() []audit.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []audit.Record
	for _, rec := range r.list {
		if rec.Origin == "gateway" {
			out = append(out, rec)
		}
	}
	return out
}

// sampleBrokerProcess builds and runs the osb-sample-broker binary on a
// port the kernel picks, with the fault table's credentials and args, and
// returns its URL.
func sampleBrokerProcess(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "osb-sample-broker")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/osb-gateway/osb-gateway/cmd/osb-sample-broker").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-log-format", "json", "-username", sampleUser, "-password", samplePass}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr, done := make(chan string, 1), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" {
				addr <- line.Addr
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return "http://" + awaitValue(t, addr, "the sample broker process to serve")
}

// TestReconcilerSettlesWithinOneEvery: a lock whose broker (a real
// osb-sample-broker process) finished while nobody polled is settled by
// the background reconciler at its first run past state.reconcile.after,
// that is within one state.reconcile.every, which is how often the sweep
// then ticks (SweepTick). The poll is the gateway's own: audited with
// origin gateway, operator reconciler.
func TestReconcilerSettlesWithinOneEvery(t *testing.T) {
	brokerURL := sampleBrokerProcess(t, "-async-delay", "1ms")
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	cfg := faultGatewayConfig(t, brokerURL, faultOptions{})
	const after, every = 5 * time.Minute, 2 * time.Minute // within the plan's maximum_polling_duration
	cfg.State.SweepInterval, cfg.State.Reconcile.After, cfg.State.Reconcile.Every = time.Hour, after, every
	if got := cfg.State.SweepTick(); got != every {
		t.Fatalf("SweepTick() = %s, want state.reconcile.every %s: the reconciler would not run each every", got, every)
	}
	recs := &records{}
	st, _ := backend.Open(store.Config{Backend: store.BackendMemory}, clk.Now)
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Now: clk.Now, Store: st,
		Audit: &proxy.AuditOptions{Writer: recs}, BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	f := &faultEnv{clock: clk, stores: []store.Store{st}, gateways: []*proxy.Gateway{g}, urls: []string{serveGatewayOn(t, g, suiteServer)}}
	res, err := f.client(t, 0, 0).ProvisionInstance(&osb.ProvisionRequest{InstanceID: "i", AcceptsIncomplete: true, ServiceID: serviceID,
		PlanID: asyncPlan, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
	if err != nil || !res.Async {
		t.Fatalf("async provision: %+v, %v", res, err)
	}
	// The broker finishes; nobody polls it through the gateway.
	waitFor(t, "the broker to finish the provision", func() bool { return brokerSays(t, brokerURL, "i") == "succeeded" })

	clk.Advance(after - time.Second)
	g.SweepOperations(context.Background()) // a tick before the operation is due
	if locks, _ := f.locks(); len(locks) != 1 {
		t.Fatalf("before state.reconcile.after: locks %q, want the provision's", locks)
	}
	clk.Advance(every) // the next tick, one every later
	g.SweepOperations(context.Background())
	if locks, _ := f.locks(); len(locks) != 0 {
		t.Errorf("one every past state.reconcile.after: locks %q, want none", locks)
	}
	eventually(t, "inventory", []string{"instance i succeeded"}, f.inventory)
	own := recs.own()
	if len(own) != 1 || own[0].Action != "reconcile" || own[0].Operator != proxy.Reconciler || own[0].Outcome != proxy.OutcomeSettledSucceeded ||
		own[0].Endpoint != "instance_last_operation" || own[0].Status != http.StatusOK {
		t.Errorf("the gateway's own audit records: %+v, want one reconcile by %q, settled succeeded", own, proxy.Reconciler)
	}
}

// brokerSays is the state the broker itself reports of instance id's
// operation (asked directly, not through the gateway).
func brokerSays(t *testing.T, brokerURL, id string) string {
	req, _ := http.NewRequest(http.MethodGet, brokerURL+"/v2/service_instances/"+id+"/last_operation", nil)
	req.SetBasicAuth(sampleUser, samplePass)
	req.Header.Set("X-Broker-API-Version", "2.14")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Logf("asking the broker: %v", err)
		return ""
	}
	defer res.Body.Close()
	var body struct{ State string }
	_ = json.NewDecoder(res.Body).Decode(&body)
	return body.State
}

// TestForcedStateReachesThePlatformsNextPoll: an operator forces "failed"
// on one replica; the platform's next poll, through a real OSB client and
// the other replica, reads it from the gateway (the broker is not asked),
// and that poll releases the lock.
func TestForcedStateReachesThePlatformsNextPoll(t *testing.T) {
	f := newFaultEnv(t, replicasEnv, faultOptions{})
	c := f.client(t, 1, 0)
	res, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "i", AcceptsIncomplete: true, ServiceID: serviceID,
		PlanID: asyncPlan, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
	if err != nil || !res.Async || res.OperationKey == nil {
		t.Fatalf("async provision: %+v, %v", res, err)
	}
	const why = "stuck at the broker; given up by the operator"
	forced := reconcileI
	forced.State, forced.Description = store.StateFailed, why
	out, err := f.gateways[0].Reconcile(context.Background(), forced)
	checkReconciled(t, out, err, proxy.OutcomeForcedFailed, 0)
	if out.Released {
		t.Errorf("the forced state released the lock before the platform's poll: %+v", out)
	}
	if locks, _ := f.locks(); len(locks) != 1 {
		t.Fatalf("after the forced state: locks %q, want the provision's until the platform polls", locks)
	}
	last, err := c.PollLastOperation(&osb.LastOperationRequest{InstanceID: "i", ServiceID: &serviceID, PlanID: &asyncPlan, OperationKey: res.OperationKey})
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	if last.State != osb.StateFailed || last.Description == nil || *last.Description != why {
		t.Errorf("the platform's poll read %q %v, want %q %q", last.State, last.Description, osb.StateFailed, why)
	}
	if n := f.broker.Count(samplebroker.EndpointInstanceLastOperation); n != 0 {
		t.Errorf("the broker got %d last_operation calls, want none: the gateway answers a forced state", n)
	}
	eventually(t, "locks after the platform's poll", nil, f.locks)
	eventually(t, "inventory", []string{"instance i failed"}, f.inventory)
}
