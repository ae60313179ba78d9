package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/observe"
	"github.com/osb-gateway/osb-gateway/rules"
)

// auditFile opens an audit file sink (fsync always: records are on disk
// when Write returns) in a temporary directory.
func auditFile(t *testing.T) (*audit.Writer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.log")
	w, err := audit.Open(config.Audit{Sink: config.AuditSinkFile, Path: path, MaxSize: "1MiB", MaxFiles: 3,
		Fsync: config.AuditFsyncAlways}, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, path
}

// readRecords waits for n records in the file and decodes them.
func readRecords(t *testing.T, path string, n int) ([]audit.Record, []byte) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
		if len(data) > 0 && len(lines) >= n || time.Now().After(deadline) {
			var recs []audit.Record
			for _, l := range lines {
				var r audit.Record
				if err := json.Unmarshal(l, &r); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				recs = append(recs, r)
			}
			return recs, data
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAuditRecordsEveryCallWithoutSecrets(t *testing.T) {
	w, path := auditFile(t)
	_, tp := traced(t)
	gw, _, _ := stagedGateway(t, Options{Tracing: &Tracing{Provider: tp, Propagator: w3c},
		Audit: &AuditOptions{Writer: w, ParameterKeys: true}})

	identity := "cloudfoundry " + base64.StdEncoding.EncodeToString([]byte(`{"user_id":"u-42","user_name":"alice","email":"a@example.com"}`))
	hdr := map[string]string{"X-Broker-API-Originating-Identity": identity, "X-Broker-API-Request-Identity": "req-a1"}
	if st, body := call(t, gw, "PUT", "/v2/service_instances/inst-a1", syncProvision(), hdr); st != 201 {
		t.Fatalf("provision: %d %s", st, body)
	}
	_, bound := call(t, gw, "PUT", "/v2/service_instances/inst-a1/service_bindings/bind-a1",
		fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"parameters":{"role":"`+paramSecret+`"}}`, samplebroker.ServiceID, samplebroker.PlanSyncID), nil)
	credPass := bindingPassword(t, bound)
	refused := provisionBody(samplebroker.PlanSyncID, `,"parameters":{"size":"`+paramSecret+`"}`)
	if st, _ := call(t, gw, "PUT", "/v2/service_instances/inst-a2", refused, nil); st != 400 {
		t.Fatalf("refused provision: %d", st)
	}
	call(t, gw, "GET", "/v2/catalog", "", nil)

	recs, data := readRecords(t, path, 4)
	for _, secret := range []string{sampleBrokerPass, "t1-pass", "Basic ", "Authorization", paramSecret, credPass,
		"alice", "a@example.com", base64.StdEncoding.EncodeToString([]byte(sampleBrokerPass))} {
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("audit file holds %q", secret)
		}
	}
	ignore := cmpopts.IgnoreFields(audit.Record{}, "Time", "TraceID", "DurationMS", "PrevHash", "Hash", "RequestID")
	want := []audit.Record{{
		ClientAddr: "127.0.0.1", Username: "t1-user",
		Tenant: "t1", Broker: "strict", Endpoint: "provision", Method: "PUT", InstanceID: "inst-a1",
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID,
		Identity:   &audit.Identity{Platform: "cloudfoundry", UserID: "u-42"},
		APIVersion: "2.17", Status: 201, Outcome: OutcomeForwarded, ParameterKeys: []string{"admin_password", "size"},
	}, {
		ClientAddr: "127.0.0.1", Username: "t1-user",
		Tenant: "t1", Broker: "strict", Endpoint: "bind", Method: "PUT", InstanceID: "inst-a1", BindingID: "bind-a1",
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID,
		APIVersion: "2.17", Status: 201, Outcome: OutcomeForwarded, ParameterKeys: []string{"role"},
	}, {
		ClientAddr: "127.0.0.1", Username: "t1-user",
		Tenant: "t1", Broker: "strict", Endpoint: "provision", Method: "PUT", InstanceID: "inst-a2",
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID,
		APIVersion: "2.17", Status: 400, Outcome: OutcomeRejected, ParameterKeys: []string{"size"},
		Error:    &audit.Error{Description: observe.DescribedByFindings}, // the real one quotes the value
		Findings: []audit.Finding{{Rule: "request.parameters.schema", Direction: "request"}},
	}, {
		ClientAddr: "127.0.0.1", Username: "t1-user",
		Tenant: "t1", Broker: "strict", Endpoint: "catalog", Method: "GET",
		APIVersion: "2.17", Status: 200, Outcome: OutcomeFromCache, FromCache: true,
	}}
	if diff := cmp.Diff(want, recs, ignore); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if recs[0].RequestID != "req-a1" || len(recs[0].TraceID) != 32 {
		t.Errorf("first record: request id %q, trace id %q", recs[0].RequestID, recs[0].TraceID)
	}
	if _, err := audit.Verify(path); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func TestAuditParametersOmitted(t *testing.T) {
	w, path := auditFile(t)
	gw, _, _ := stagedGateway(t, Options{Audit: &AuditOptions{Writer: w, ParameterKeys: false}})
	call(t, gw, "PUT", "/v2/service_instances/inst-o1", syncProvision(), nil)
	recs, data := readRecords(t, path, 1)
	if recs[0].ParameterKeys != nil || bytes.Contains(data, []byte("admin_password")) {
		t.Errorf("parameters: omit wrote keys: %s", data)
	}
}

// failingWriter fails every write.
type failingWriter struct{ n atomic.Int64 }

func (f *failingWriter) Write(*audit.Record) error { f.n.Add(1); return errors.New("disk full") }

func TestAuditWriteErrorNeverFailsTheCall(t *testing.T) {
	fw := &failingWriter{}
	gw, _, _ := stagedGateway(t, Options{Audit: &AuditOptions{Writer: fw}})
	for range 3 {
		if st, body := call(t, gw, "GET", "/v2/catalog", "", nil); st != http.StatusOK || !strings.Contains(body, "services") {
			t.Fatalf("catalog with a failing audit sink: %d %s", st, body)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for fw.n.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := fw.n.Load(); n != 3 {
		t.Errorf("%d writes attempted, want 3", n)
	}
}

// recordingWriter keeps copies of the records it is given.
type recordingWriter struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (rw *recordingWriter) Write(r *audit.Record) error {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.recs = append(rw.recs, *r)
	return nil
}

// TestAuditRecordSameThroughAnyWriter checks that the record built on the
// stack for an *audit.Writer is the one other AuditWriters receive: two
// gateways on one fixed clock, one writing to an *audit.Writer and one to
// another AuditWriter, get the same calls (but for the hash chain).
func TestAuditRecordSameThroughAnyWriter(t *testing.T) {
	w, path := auditFile(t)
	rw := &recordingWriter{}
	start := time.Date(2026, 11, 22, 3, 18, 0, 0, time.UTC)
	now := func() time.Time { return start }
	direct, _, _ := stagedGateway(t, Options{Now: now, Audit: &AuditOptions{Writer: w, ParameterKeys: true}})
	other, _, _ := stagedGateway(t, Options{Now: now, Audit: &AuditOptions{Writer: rw, ParameterKeys: true}})
	identity := "kubernetes " + base64.StdEncoding.EncodeToString([]byte(`{"username":"duke","groups":["admin"]}`))
	for _, gw := range []*httptest.Server{direct, other} {
		call(t, gw, "PUT", "/v2/service_instances/inst-s1", syncProvision(),
			map[string]string{"x-broker-api-originating-identity": identity, "X-Broker-API-Request-Identity": "req-s1"})
		call(t, gw, "PUT", "/v2/service_instances/inst-s2", provisionBody(samplebroker.PlanSyncID, `,"parameters":{"size":"`+paramSecret+`"}`),
			map[string]string{"X-Broker-API-Request-Identity": "req-s2"})
		call(t, gw, "GET", "/v2/service_instances/inst-s1/last_operation", "", map[string]string{"X-Broker-API-Request-Identity": "req-s3"})
	}
	recs, _ := readRecords(t, path, 3)
	deadline := time.Now().Add(2 * time.Second)
	for {
		rw.mu.Lock()
		n := len(rw.recs)
		rw.mu.Unlock()
		if n >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if diff := cmp.Diff(rw.recs, recs, cmpopts.IgnoreFields(audit.Record{}, "PrevHash", "Hash")); diff != "" {
		t.Errorf("records (-other writer +*audit.Writer):\n%s", diff)
	}
	if len(recs) != 3 || recs[0].Identity == nil || recs[0].Identity.Username != "duke" || len(recs[1].Findings) == 0 {
		t.Errorf("records lack the identity or findings: %+v", recs)
	}
}

// TestAuditStageWritesWithoutAllocating: the record of a call without an
// originating identity, findings or an error costs no allocation, nor
// does writing it to an *audit.Writer; nor does a platform's repeated
// originating identity (decoded once, then cached).
func TestAuditStageWritesWithoutAllocating(t *testing.T) {
	w, err := audit.Open(config.Audit{Sink: config.AuditSinkStdout, Fsync: config.AuditFsyncNever}, audit.Options{Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	now := time.Date(2026, 11, 22, 3, 18, 0, 0, time.UTC)
	h := observe.WithAudit(&AuditOptions{Writer: w, ParameterKeys: true}, nil, slog.New(slog.DiscardHandler), func() time.Time { return now }, nil)(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s := &Scope{Start: now.Add(-time.Millisecond), RequestID: "46d1819c-5f0c-4c5d-8e9f-0a1b2c3d4e5f", Tenant: "t1", Broker: "b1",
		Version: osb.Version{Major: 2, Minor: 17}, Status: 200, TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		Call: rules.Call{Endpoint: rules.InstanceLastOperation, InstanceID: "i-1"}}
	r := httptest.NewRequest("GET", "/t1/b1/v2/service_instances/i-1/last_operation", nil)
	r = r.WithContext(core.ContextWith(r.Context(), s))
	if n := testing.AllocsPerRun(200, func() { h.ServeHTTP(nil, r) }); n != 0 {
		t.Errorf("%v allocations per record, want 0", n)
	}
	// With an originating identity: the Identity and its user id.
	r.Header.Set(osb.HeaderOriginatingIdentity, "cloudfoundry "+base64.StdEncoding.EncodeToString([]byte(`{"user_id":"683ea748-3092-4ff4-b656-39cacc4d5360","user_name":"alice"}`)))
	if n := testing.AllocsPerRun(200, func() { h.ServeHTTP(nil, r) }); n != 0 {
		t.Errorf("%v allocations per record with a repeated originating identity, want 0", n)
	}
}
