package samplebroker

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// openFixture opens a broker on a state file behind a real listener, on
// clock, with the test credentials. Call close (or let the test end) to
// stop it.
func openFixture(t *testing.T, path string, clock *osbtest.Clock) *fixture {
	t.Helper()
	b, err := Open(Options{Username: testUser, Password: testPass, Now: clock.Now, StateFile: path})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b)
	t.Cleanup(func() {
		srv.Close()
		_ = b.Close()
	})
	return &fixture{t: t, b: b, srv: srv, clock: clock}
}

// stop ends the fixture's server and closes its state file.
func (f *fixture) stop() {
	f.srv.Close()
	if err := f.b.Close(); err != nil {
		f.t.Fatal(err)
	}
}

// dump settles every record at the broker's clock and returns them as they
// would be journalled, with the operation counter.
func dump(b *Broker) (map[string]*instanceRecord, uint64) {
	now := b.now()
	m := make(map[string]*instanceRecord)
	for i := range b.store.shards {
		sh := &b.store.shards[i]
		sh.mu.Lock()
		for id := range sh.instances {
			in := sh.get(id, now)
			for _, bd := range in.bindings {
				bd.settle(now)
			}
			m[id] = recordOf(in)
		}
		sh.mu.Unlock()
	}
	return m, b.opSeq.Load()
}

func asyncQuery(planID string) string { return query(ServiceID, planID) + "&accepts_incomplete=true" }

// TestStateFileRestart builds every kind of record — synchronous and
// asynchronous, in progress, settled, failed, deleted — and opens a second
// broker on the same file: it holds the same records, answers the same,
// and hands out operation ids the first never did.
func TestStateFileRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.jsonl")
	clock := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	f := openFixture(t, path, clock)
	failNext := func(endpoint string) {
		t.Helper()
		if err := f.b.InjectFault(Fault{Endpoint: endpoint, FailOperation: true, Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	bindAsync := func(iid, bid string) req {
		return req{method: "PUT", path: bindingPath(iid, bid) + "?accepts_incomplete=true", body: bindBody(ServiceID, PlanAsyncID, `{"n":1}`)}
	}

	// Settled before the restart.
	f.must(provisionSync("sync"), 201)
	f.must(req{method: "PUT", path: bindingPath("sync", "k"), body: bindBody(ServiceID, PlanSyncID, "")}, 201)
	f.must(req{method: "PATCH", path: instancePath("sync"), body: `{"service_id":"` + ServiceID + `","parameters":{"size":"small"}}`}, 200)
	f.must(provisionSync("gone"), 201)
	f.must(req{method: "DELETE", path: instancePath("gone") + query(ServiceID, PlanSyncID)}, 200)
	for _, iid := range []string{"upd", "binds", "del"} {
		f.must(provisionAsync(iid), 202)
	}
	failNext(EndpointProvision)
	f.must(provisionAsync("failed"), 202)
	clock.Advance(DefaultAsyncDelay)
	f.must(bindAsync("binds", "done"), 202)
	f.must(req{method: "DELETE", path: instancePath("del") + asyncQuery(PlanAsyncID)}, 202)
	clock.Advance(DefaultAsyncDelay)

	// In progress across the restart.
	f.must(provisionAsync("prov"), 202)
	f.must(req{method: "PATCH", path: instancePath("upd") + "?accepts_incomplete=true",
		body: `{"service_id":"` + ServiceID + `","plan_id":"` + PlanSyncID + `","parameters":{"size":"large"}}`}, 202)
	f.must(bindAsync("binds", "pending"), 202)
	failNext(EndpointBind)
	f.must(bindAsync("binds", "failing"), 202)
	f.must(req{method: "DELETE", path: bindingPath("binds", "done") + asyncQuery(PlanAsyncID)}, 202)

	before, seq := dump(f.b)
	gets := []req{
		{method: "GET", path: instancePath("sync")}, {method: "GET", path: bindingPath("sync", "k")},
		{method: "GET", path: instancePath("upd")}, {method: "GET", path: instancePath("gone")},
		lastOp("prov"), lastOp("upd"), lastOp("del"), lastOp("failed"),
		{method: "GET", path: bindingPath("binds", "pending") + "/last_operation"},
		{method: "GET", path: "/_sample/holdings"},
	}
	answers := func(f *fixture) []string {
		var out []string
		for _, rq := range gets {
			r := f.do(rq)
			out = append(out, rq.path+" "+http.StatusText(r.status)+" "+string(r.body))
		}
		return out
	}
	wantAnswers := answers(f)
	f.stop()

	g := openFixture(t, path, clock)
	after, seqAfter := dump(g.b)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("records after the restart (-before +after):\n%s", diff)
	}
	if seqAfter != seq {
		t.Errorf("operation counter %d after the restart, want %d", seqAfter, seq)
	}
	if diff := cmp.Diff(wantAnswers, answers(g)); diff != "" {
		t.Errorf("answers after the restart (-before +after):\n%s", diff)
	}
	if data, _ := os.ReadFile(path); bytes.Count(data, []byte{'\n'}) != 1+len(before) {
		t.Errorf("compacted file has %d lines, want %d (the counter and one per record):\n%s",
			bytes.Count(data, []byte{'\n'}), 1+len(before), data)
	}

	// The operations in progress finish on time, and new ones get new ids.
	clock.Advance(DefaultAsyncDelay)
	if got := g.state(t, lastOp("upd")); got != "succeeded" {
		t.Errorf("update after the restart: %q", got)
	}
	if plan := g.must(req{method: "GET", path: instancePath("upd")}, 200).str(t, "plan_id"); plan != PlanSyncID {
		t.Errorf("plan after the update: %s", plan)
	}
	op := g.must(provisionAsync("new"), 202).str(t, "operation")
	if want := "provision-" + jsonUint(seq+1); op != want {
		t.Errorf("new operation %q, want %q", op, want)
	}
}

func jsonUint(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// TestStateFileTornLine replays a file whose last write a crash cut short:
// the torn line is ignored, the last complete line of each id wins.
func TestStateFileTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.jsonl")
	clock := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	f := openFixture(t, path, clock)
	f.must(provisionSync("a"), 201)
	f.must(provisionSync("b"), 201)
	f.must(req{method: "DELETE", path: instancePath("b") + query(ServiceID, PlanSyncID)}, 200)
	f.must(provisionAsync("c"), 202)
	f.stop()

	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.WriteString(`{"id":"torn","op_seq":99,"instance":{"plan":"` + PlanSyncID + `","li`); err != nil {
		t.Fatal(err)
	}
	file.Close()

	g := openFixture(t, path, clock)
	want := Holdings{Instances: []string{"a", "c"}}
	if diff := cmp.Diff(want, g.b.Holdings()); diff != "" {
		t.Errorf("holdings (-want +got):\n%s", diff)
	}
	if _, seq := dump(g.b); seq != 1 {
		t.Errorf("operation counter %d, want 1 (the torn line's is not taken)", seq)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.SplitAfter(string(data), "\n") {
		if line == "" {
			continue
		}
		var l journalLine
		if !strings.HasSuffix(line, "\n") || json.Unmarshal([]byte(line), &l) != nil {
			t.Errorf("line %d of the compacted file is not whole: %q", i+1, line)
		}
	}
}

func TestStateFileErrors(t *testing.T) {
	t.Run("corrupt line before the end", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.jsonl")
		if err := os.WriteFile(path, []byte("{\"id\":\"a\"\n{\"op_seq\":1}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(Options{StateFile: path}); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("Open: %v, want an error naming line 1", err)
		}
	})
	t.Run("unknown plan", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.jsonl")
		if err := os.WriteFile(path, []byte(`{"id":"a","op_seq":1,"instance":{"plan":"nope"}}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(Options{StateFile: path}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
			t.Errorf("Open: %v, want an error naming the plan", err)
		}
	})
	t.Run("change after Close", func(t *testing.T) {
		clock := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
		f := openFixture(t, filepath.Join(t.TempDir(), "state.jsonl"), clock)
		if err := f.b.Close(); err != nil {
			t.Fatal(err)
		}
		f.must(provisionSync("a"), 500)
		if err := f.b.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
	t.Run("New refuses a state file", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("New with StateFile did not panic")
			}
		}()
		New(Options{StateFile: "x"})
	})
}
