package proxy

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
)

// countingStore records the store calls a provision makes.
type countingStore struct {
	store.Store
	mu    sync.Mutex
	calls []string
}

func (c *countingStore) note(name string) {
	c.mu.Lock()
	c.calls = append(c.calls, name)
	c.mu.Unlock()
}

// took returns the calls made since the last took.
func (c *countingStore) took() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	return out
}

func (c *countingStore) Acquire(ctx context.Context, l store.Lock) (store.Lock, error) {
	c.note("Acquire")
	return c.Store.Acquire(ctx, l)
}

func (c *countingStore) AcquireReading(ctx context.Context, l store.Lock) (store.Lock, *store.Instance, error) {
	c.note("AcquireReading")
	return c.Store.AcquireReading(ctx, l)
}

func (c *countingStore) Get(ctx context.Context, key string) (store.Lock, error) {
	c.note("Get")
	return c.Store.Get(ctx, key)
}

func (c *countingStore) Release(ctx context.Context, key, owner string) error {
	c.note("Release")
	return c.Store.Release(ctx, key, owner)
}

func (c *countingStore) GetInstance(ctx context.Context, broker, id string) (store.Instance, error) {
	c.note("GetInstance")
	return c.Store.GetInstance(ctx, broker, id)
}

func (c *countingStore) PutInstance(ctx context.Context, in store.Instance) (store.Instance, error) {
	c.note("PutInstance")
	return c.Store.PutInstance(ctx, in)
}

func (c *countingStore) PutInstanceCancelling(ctx context.Context, in store.Instance, id string) (store.Instance, bool, error) {
	c.note("PutInstanceCancelling")
	return c.Store.PutInstanceCancelling(ctx, in, id)
}

func (c *countingStore) DeleteOrphan(ctx context.Context, id string) error {
	c.note("DeleteOrphan")
	return c.Store.DeleteOrphan(ctx, id)
}

func (c *countingStore) PutOrphan(ctx context.Context, o store.Orphan) error {
	c.note("PutOrphan")
	return c.Store.PutOrphan(ctx, o)
}

// TestProvisionStoreCalls: a provision of a new instance on a broker two
// tenants share makes four store calls, each a round trip on Redis and
// PostgreSQL: the owner stage's look at the instance, the lock with the
// stage's second look (the record read after the lock is taken, in the
// same round trip), the record (which cancels a pending orphan in the
// same call, and keeps a replaced record's Created itself), the release.
// It made seven: the second look in a call of its own, the record read
// once more for its Created, and the orphan deleted in a call of its own
// (docs/performance.md, issue #39).
// A provision retried after a failure cancels the orphan the failure left
// in its record's call, and says so in the audit record.
func TestProvisionStoreCalls(t *testing.T) {
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	broker := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", Now: clock.Now})
	bs := httptest.NewServer(broker)
	t.Cleanup(bs.Close)
	yaml := `
admin: {address: "off"}
brokers:
  - name: b
    url: ` + bs.URL + `
    username: sample
    password: sample-secret
    orphan_mitigation: mitigate
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b}]
  - name: t2
    credentials: [{username: t2-user, password: t2-pass}]
    routes: [{broker: b}]
`
	cfg, err := config.Parse([]byte(yaml), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := backend.Open(store.Config{Backend: store.BackendMemory}, clock.Now)
	st := &countingStore{Store: mem}
	w, path := auditFile(t)
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Store: st, Audit: &AuditOptions{Writer: w}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	provision := func(id string) int {
		t.Helper()
		r, _ := do(t, "PUT", gw.URL+"/t1/b/v2/service_instances/"+id, "t1-user", "t1-pass", "2.15",
			strings.NewReader(provisionBody(samplebroker.PlanSyncID, "")))
		return r.StatusCode
	}
	if st := provision("warm-up"); st != 201 { // the catalog, fetched once
		t.Fatalf("provision: %d", st)
	}
	st.took()

	if code := provision("i1"); code != 201 {
		t.Fatalf("provision: %d", code)
	}
	want := []string{"GetInstance", "AcquireReading", "PutInstanceCancelling", "Release"}
	if d := cmp.Diff(want, st.took()); d != "" {
		t.Errorf("store calls of a provision (-want +got):\n%s", d)
	}

	_ = broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Count: 1, Status: 500, Body: `{}`})
	if code := provision("i2"); code != 500 {
		t.Fatalf("provision the broker fails: %d", code)
	}
	if os, err := st.ListOrphans(context.Background()); err != nil || len(os) != 1 {
		t.Fatalf("orphans after the failure: %v, %v", os, err)
	}
	st.took()
	if code := provision("i2"); code != 201 {
		t.Fatalf("provision retried: %d", code)
	}
	if d := cmp.Diff(want, st.took()); d != "" {
		t.Errorf("store calls of a retried provision (-want +got):\n%s", d)
	}
	if os, err := st.ListOrphans(context.Background()); err != nil || len(os) != 0 {
		t.Errorf("orphans after the retry succeeded: %v, %v; want none", os, err)
	}
	recs, _ := readRecords(t, path, 4)
	if last := recs[len(recs)-1]; last.Orphan != "cancelled" {
		t.Errorf("audit record of the retry: orphan_mitigation %q, want cancelled", last.Orphan)
	}
}
