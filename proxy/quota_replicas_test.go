package proxy

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/quota"
)

// quotaStores are the stores the replica tests run on: memory, and a real
// redis-server (skipped where none is installed), on the test's clock.
var quotaStores = []struct {
	name string
	open func(t *testing.T, clock *osbtest.Clock) store.Store
}{
	{"memory", func(t *testing.T, clock *osbtest.Clock) store.Store {
		return openStore(t, store.Config{Backend: store.BackendMemory}, clock)
	}},
	{"redis", func(t *testing.T, clock *osbtest.Clock) store.Store {
		r := storetest.StartRedis(t)
		return openStore(t, store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{r.Addr}}}, clock)
	}},
}

// deadReplicaEnv is a gateway whose tenant t1 has a quota of 3 and 2
// instances recorded, on the store sc opens, with what a replica killed
// (kill -9) while a provision of t1 was at the broker leaves, as it would
// leave it: the lock of that provision (the broker got the call, and may
// have carried it out), held by an owner that will never release it, and
// with quotaLock also the quota's lock, taken with the short lease.
func deadReplicaEnv(t *testing.T, open func(*testing.T, *osbtest.Clock) store.Store, quotaLock bool) *shimEnv {
	t.Helper()
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newShimEnv(t, shimOptions{store: open(t, clock), clock: clock, quotas: "    quotas: [{name: three, max_instances: 3}]"})
	for _, id := range []string{"rec1", "rec2"} {
		if a := e.call(t, "PUT", "/v2/service_instances/"+id+"?accepts_incomplete=true", "2.15", shimProvision); a.status != http.StatusCreated {
			t.Fatalf("provision %s: %d %s", id, a.status, a.body)
		}
	}
	e.drainTimers()
	now := clock.Now()
	left := []store.Lock{{Key: store.LockKey("b", "dead1"), Owner: "dead-replica-call", Kind: store.KindProvision, Tenant: "t1", Broker: "b",
		InstanceID: "dead1", ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID,
		Started: now, Deadline: now.Add(30*time.Second + guard.SyncHoldMargin)}}
	if quotaLock {
		left = append(left, store.Lock{Key: store.LockKey("quota:t1", "three"), Owner: "dead-replica-quota", Kind: store.KindProvision,
			Tenant: "t1", Broker: "quota:t1", InstanceID: "three", Started: now, Deadline: now.Add(quota.Lease)})
	}
	for _, l := range left {
		if _, err := e.st.Acquire(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestQuotaLockOfDeadReplica: while the quota's lock a dead replica left
// holds, a provision waits quotaWait at most, then gets 429 with
// Retry-After (the lease left) and a description saying that another
// replica holds the quota's lock, not 503 "state store is unavailable"
// with the store up; the broker gets nothing. (It used to wait for the
// call's timeout and get 503, for the broker's timeout and a minute more.)
func TestQuotaLockOfDeadReplica(t *testing.T) {
	for _, sc := range quotaStores {
		t.Run(sc.name, func(t *testing.T) {
			e := deadReplicaEnv(t, sc.open, true)
			pending := e.send(t, "PUT", "/v2/service_instances/new1?accepts_incomplete=true", "2.15", shimProvision)
			e.fire(t) // the wait's bound: quotaWait has passed
			a := wait(t, pending)
			if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "10" ||
				!strings.Contains(a.body, `quota \"three\" of tenant \"t1\" is being checked by another gateway replica: its lock is held by another replica`) {
				t.Errorf("provision while the dead replica's quota lock holds: %d Retry-After %q %s, want 429, Retry-After 10 and the other replica",
					a.status, a.header.Get("Retry-After"), a.body)
			}
			e.clock.Advance(quota.Lease - time.Second)
			pending = e.send(t, "PUT", "/v2/service_instances/new1?accepts_incomplete=true", "2.15", shimProvision)
			e.fire(t)
			if a := wait(t, pending); a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "1" {
				t.Errorf("provision a second before the lease ends: %d Retry-After %q %s, want 429 and 1", a.status, a.header.Get("Retry-After"), a.body)
			}
			if n := e.broker.Count(samplebroker.EndpointProvision); n != 2 {
				t.Errorf("the broker got %d provisions, want the 2 recorded", n)
			}
		})
	}
}

// TestQuotaCountsDeadReplicasProvision: the provision a dead replica left
// at the broker counts against its tenant's quota as if its instance
// existed, until it is known not to: with 2 instances recorded under a
// quota of 3, the next provision is refused with 422 "holds 3" while that
// provision's lock is held, once the lock is past its deadline but not
// swept, and once the sweep made it an orphan candidate; the broker gets
// nothing. When the candidate is gone (the undo confirmed), the provision
// passes. (The in-flight instance used to count nowhere, and 5 instances
// stood under a quota of 3.)
func TestQuotaCountsDeadReplicasProvision(t *testing.T) {
	for _, sc := range quotaStores {
		t.Run(sc.name, func(t *testing.T) {
			e := deadReplicaEnv(t, sc.open, false)
			ctx := context.Background()
			refused := func(what string) {
				t.Helper()
				a := e.call(t, "PUT", "/v2/service_instances/new1?accepts_incomplete=true", "2.15", shimProvision)
				want := `it admits 3 service instances and the tenant holds 3 (1 of them still being provisioned`
				if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, want) {
					t.Errorf("%s: %d %s, want 422 with %q", what, a.status, a.body, want)
				}
			}
			refused("the dead replica's provision held")
			e.clock.Advance(30*time.Second + guard.SyncHoldMargin)
			refused("its lock past its deadline, not yet swept")
			e.g.SweepOperations(ctx)
			if l := e.lock(t, store.LockKey("b", "dead1")); l.Key != "" {
				t.Fatalf("the sweep left %+v", l)
			}
			orphans, err := e.st.ListOrphans(ctx)
			if err != nil || len(orphans) != 1 || orphans[0].InstanceID != "dead1" {
				t.Fatalf("orphans %+v (%v), want the dead replica's provision's", orphans, err)
			}
			refused("swept into an orphan candidate")
			if n := e.broker.Count(samplebroker.EndpointProvision); n != 2 {
				t.Errorf("the broker got %d provisions, want the 2 recorded", n)
			}
			if err := e.st.DeleteOrphan(ctx, orphans[0].ID); err != nil { // the undo confirmed: dead1 is gone
				t.Fatal(err)
			}
			if a := e.call(t, "PUT", "/v2/service_instances/new1?accepts_incomplete=true", "2.15", shimProvision); a.status != http.StatusCreated {
				t.Errorf("provision once the in-flight instance is known gone: %d %s, want 201", a.status, a.body)
			}
		})
	}
}

// drainTimers drops the async shim's timers started so far (calls the
// broker answered in time), so that fire fires the next one.
func (e *shimEnv) drainTimers() {
	for {
		select {
		case <-e.timers.started:
		default:
			return
		}
	}
}

// lapsingStore is a store on which the first operation lock a provision
// takes (on broker b) comes after the quota's lease has run out and
// another replica took the quota's lock: a count slower than quotaLease.
type lapsingStore struct {
	store.Store
	once  sync.Once
	lapse func()
}

func (s *lapsingStore) Acquire(ctx context.Context, l store.Lock) (store.Lock, error) {
	if l.Broker == "b" {
		s.once.Do(s.lapse)
	}
	return s.Store.Acquire(ctx, l)
}

func (s *lapsingStore) AcquireReading(ctx context.Context, l store.Lock) (store.Lock, *store.Instance, error) {
	return store.AcquireThenRead(ctx, s, l)
}

// TestQuotaLeaseLapsed: a provision whose quota's lock lapsed between its
// count and its own operation lock, and was taken by another replica
// (which may have counted without it), is not admitted: 429 with
// Retry-After 1, its operation lock released, the other replica's quota
// lock left alone, and nothing sent to the broker.
func TestQuotaLeaseLapsed(t *testing.T) {
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := &lapsingStore{Store: openStore(t, store.Config{Backend: store.BackendMemory}, clock)}
	quotaKey := store.LockKey("quota:t1", "three")
	st.lapse = func() {
		clock.Advance(quota.Lease)
		now := clock.Now()
		if _, err := st.Store.Acquire(context.Background(), store.Lock{Key: quotaKey, Owner: "other-replica", Kind: store.KindProvision,
			Tenant: "t1", Broker: "quota:t1", InstanceID: "three", Started: now, Deadline: now.Add(quota.Lease)}); err != nil {
			t.Error(err)
		}
	}
	e := newShimEnv(t, shimOptions{store: st, clock: clock, quotas: "    quotas: [{name: three, max_instances: 3}]"})
	a := e.call(t, "PUT", "/v2/service_instances/new1?accepts_incomplete=true", "2.15", shimProvision)
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "1" ||
		!strings.Contains(a.body, `its lock lapsed before the provision was admitted`) {
		t.Errorf("provision whose quota lock lapsed: %d Retry-After %q %s, want 429 and 1", a.status, a.header.Get("Retry-After"), a.body)
	}
	if l := e.lock(t, store.LockKey("b", "new1")); l.Key != "" {
		t.Errorf("the provision's lock stays: %+v", l)
	}
	if l := e.lock(t, quotaKey); l.Owner != "other-replica" {
		t.Errorf("the quota's lock: %+v, want the other replica's still", l)
	}
	if n := e.broker.Count(samplebroker.EndpointProvision); n != 0 {
		t.Errorf("the broker got %d provisions, want none", n)
	}
}

// sweepOrderStore notes the orphans queued when the sweep deletes the
// expired locks.
type sweepOrderStore struct {
	store.Store
	atExpiry []store.Orphan
}

func (s *sweepOrderStore) ExpireDue(ctx context.Context, now time.Time) ([]store.Lock, error) {
	s.atExpiry, _ = s.Store.ListOrphans(ctx)
	return s.Store.ExpireDue(ctx, now)
}

// TestQuotaSweepRecordsCandidateFirst: the sweep records the orphan
// candidate of a provision whose lock passed its deadline unsettled before
// it deletes that lock, so no count in between finds the instance neither
// locked nor queued.
func TestQuotaSweepRecordsCandidateFirst(t *testing.T) {
	var st *sweepOrderStore
	e := deadReplicaEnv(t, func(t *testing.T, clock *osbtest.Clock) store.Store {
		st = &sweepOrderStore{Store: openStore(t, store.Config{Backend: store.BackendMemory}, clock)}
		return st
	}, false)
	e.clock.Advance(30*time.Second + guard.SyncHoldMargin)
	e.g.SweepOperations(context.Background())
	if len(st.atExpiry) != 1 || st.atExpiry[0].InstanceID != "dead1" {
		t.Errorf("orphans queued when the sweep deleted the locks: %+v, want dead1's", st.atExpiry)
	}
	if orphans, _ := st.ListOrphans(context.Background()); len(orphans) != 1 {
		t.Errorf("orphans after the sweep: %+v, want dead1's alone", orphans)
	}
}
