package postgres

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// hook is a pgx tracer counting statements that calls after (if set) once
// a statement with the SQL text after matches has ended.
type hook struct {
	statements
	match string
	after func()
}

type sqlKey struct{}

func (h *hook) TraceQueryStart(ctx context.Context, c *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(h.statements.TraceQueryStart(ctx, c, d), sqlKey{}, d.SQL)
}

func (h *hook) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if sql, _ := ctx.Value(sqlKey{}).(string); sql == h.match && h.after != nil {
		after := h.after
		h.after = nil
		after()
	}
}

// usage is every usage record of s.
func usage(t *testing.T, s store.Store) []store.UsageRecord {
	t.Helper()
	var out []store.UsageRecord
	for r, err := range s.UsageRecords(context.Background(), "", time.Time{}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestPostgresPutInstanceStatements: PutInstance of an instance without a
// record is one statement; over a record, two (the record read back by
// the first, and the replacement), a plan change's usage record written
// by the second.
func TestPostgresPutInstanceStatements(t *testing.T) {
	srv := storetest.StartPostgres(t)
	clock := osbtest.NewClock(storetest.T0)
	var count statements
	s, err := open(srv.StoreConfig(t).WithDefaults().Postgres, clock.Now, &count)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := Migrate(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	in := storetest.Instance("b1", "i1", "cf1")
	put := func(what string, want int64) {
		t.Helper()
		count.n.Store(0)
		if _, err := s.PutInstance(context.Background(), in); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n := count.n.Load(); n != want {
			t.Errorf("%s: %d statements, want %d", what, n, want)
		}
	}
	put("a new instance", 1)
	put("the same again", 2)
	clock.Advance(time.Hour)
	in.PlanID = "plan-2"
	put("a plan change", 2)
	// Without a Created, the same: the first statement reads the record
	// whose Created the put keeps.
	keep := in
	keep.InstanceID, keep.Created = "i2", time.Time{}
	count.n.Store(0)
	if _, cancelled, err := s.PutInstanceCancelling(context.Background(), keep, "o-i2"); err != nil || cancelled {
		t.Fatalf("PutInstanceCancelling of a new instance: %v, cancelled %v", err, cancelled)
	}
	if n := count.n.Load(); n != 1 {
		t.Errorf("a new instance without a Created, with an orphan to cancel: %d statements, want 1", n)
	}
	count.n.Store(0)
	if got, err := s.PutInstance(context.Background(), keep); err != nil || !got.Created.Equal(clock.Now()) {
		t.Fatalf("PutInstance over a record: Created %v, %v", got.Created, err)
	}
	if n := count.n.Load(); n != 2 {
		t.Errorf("over a record without a Created: %d statements, want 2", n)
	}
	// Bindings alike; one with a Created is one upsert.
	bd := storetest.Binding("b1", "i1", "x1")
	for _, c := range []struct {
		what    string
		created time.Time
		want    int64
	}{{"a new binding without a Created", time.Time{}, 1}, {"the same again", time.Time{}, 2}, {"with a Created", storetest.T0, 1}} {
		bd.Created = c.created
		count.n.Store(0)
		if _, err := s.PutBinding(context.Background(), bd); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if n := count.n.Load(); n != c.want {
			t.Errorf("PutBinding, %s: %d statements, want %d", c.what, n, c.want)
		}
	}
	want := []store.UsageRecord{{Tenant: "cf1", Broker: "b1", ServiceID: "svc-1", PlanID: "plan-1", InstanceID: "i1",
		Created: in.Created, Deleted: clock.Now()}}
	if d := cmp.Diff(want, usage(t, s)); d != "" {
		t.Errorf("usage records (-want +got):\n%s", d)
	}
	got, err := s.GetInstance(context.Background(), "b1", "i1")
	if err != nil || got.PlanID != "plan-2" {
		t.Errorf("GetInstance: plan %q, %v; want plan-2", got.PlanID, err)
	}
}

// TestPostgresPutInstanceReplacedMeanwhile: a put whose record another
// replica replaces between its read and its write does not write over
// that record: it puts in a transaction holding the row's lock, and the
// usage record of its plan change is that of the record it replaced
// (plan-3), not of the one it first read (plan-1, whose usage record the
// other put wrote).
func TestPostgresPutInstanceReplacedMeanwhile(t *testing.T) {
	srv := storetest.StartPostgres(t)
	cfg := srv.StoreConfig(t)
	clock := osbtest.NewClock(storetest.T0)
	other := openAt(t, cfg, clock.Now)
	tr := &hook{match: insertInstanceSQL}
	s, err := open(cfg.WithDefaults().Postgres, clock.Now, tr)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	in := storetest.Instance("b1", "i1", "cf1")
	storetest.MustPutInstance(t, s, in)
	clock.Advance(time.Hour)
	var meanwhile atomic.Bool
	tr.after = func() {
		x := in
		x.PlanID, x.Created = "plan-3", storetest.T0.Add(time.Minute)
		if _, err := other.PutInstance(ctx, x); err != nil {
			t.Error(err)
		}
		meanwhile.Store(true)
		clock.Advance(time.Hour)
	}
	put := in
	put.PlanID, put.Created = "plan-2", time.Time{} // keeping the Created of the record it replaces
	tr.n.Store(0)
	stored, err := s.PutInstance(ctx, put)
	if err != nil {
		t.Fatal(err)
	}
	if !meanwhile.Load() {
		t.Fatal("the other put did not run")
	}
	// The read, the replacement that found another record, and the
	// transaction: BEGIN, SELECT … FOR UPDATE, INSERT, the usage record,
	// COMMIT.
	if n := tr.n.Load(); n != 7 {
		t.Errorf("%d statements, want 7", n)
	}
	got, err := s.GetInstance(ctx, "b1", "i1")
	if err != nil || got.PlanID != "plan-2" || !cmp.Equal(stored, got) {
		t.Errorf("GetInstance: plan %q, %v; want plan-2 as PutInstance returned it (-returned +got):\n%s", got.PlanID, err, cmp.Diff(stored, got))
	}
	if want := storetest.T0.Add(time.Minute); !got.Created.Equal(want) {
		t.Errorf("Created %v, want %v, the Created of the record it replaced", got.Created, want)
	}
	r := store.UsageRecord{Tenant: "cf1", Broker: "b1", ServiceID: "svc-1", InstanceID: "i1", Created: in.Created}
	want := []store.UsageRecord{r, r}
	want[0].PlanID, want[0].Deleted = "plan-1", storetest.T0.Add(time.Hour)
	want[1].PlanID, want[1].Deleted, want[1].Created = "plan-3", storetest.T0.Add(2*time.Hour), storetest.T0.Add(time.Minute)
	if d := cmp.Diff(want, usage(t, s)); d != "" {
		t.Errorf("usage records (-want +got):\n%s", d)
	}
}
