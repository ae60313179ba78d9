package redis

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// TestRedisInventoryRoundTrips counts the round trips of each inventory
// call, and checks that none SCANs.
func TestRedisInventoryRoundTrips(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	s := openRedisAt(t, srv.StoreConfig(), osbtest.NewClock(storetest.T0).Now)
	storetest.ListFixture(t, s)
	var rt storetest.RoundTrips
	cmds := &commands{n: map[string]int{}}
	s.client.AddHook(&rt)
	s.client.AddHook(cmds)
	in, bd := storetest.Instance("b1", "i9", "x"), storetest.Binding("b1", "i9", "x1")
	// Without a Created, a put keeps the Created of the record it
	// replaces: one round trip for a new record, two over one.
	fresh, freshB := in, storetest.Binding("b1", "i8", "x8")
	fresh.InstanceID, fresh.Created, freshB.Created = "i8", time.Time{}, time.Time{}

	tests := []struct {
		name string
		call func() error
		want int64
	}{
		{"PutInstance", func() error { _, err := s.PutInstance(ctx, in); return err }, 1},
		{"GetInstance", func() error { _, err := s.GetInstance(ctx, "b1", "i9"); return err }, 1},
		{"PutBinding", func() error { _, err := s.PutBinding(ctx, bd); return err }, 1},
		{"GetBinding", func() error { _, err := s.GetBinding(ctx, "b1", "i9", "x1"); return err }, 1},
		{"ListBindings", func() error { _, err := s.ListBindings(ctx, "b1", "i9"); return err }, 1},
		{"ListInstances of a broker", func() error {
			_, _, err := s.ListInstances(ctx, store.InstanceFilter{Broker: "b1"}, "", 3)
			return err
		}, 1},
		{"ListInstances of a broker's tenant", func() error {
			_, _, err := s.ListInstances(ctx, store.InstanceFilter{Broker: "b1", Tenant: "x"}, store.EncodeCursor("b1", "i1"), 2)
			return err
		}, 1},
		{"ListInstances of all, a page within one broker", func() error {
			_, _, err := s.ListInstances(ctx, store.InstanceFilter{}, store.EncodeCursor("b1", "a"), 2)
			return err
		}, 2},
		{"ListInstances of all, a page over two brokers", func() error {
			_, _, err := s.ListInstances(ctx, store.InstanceFilter{}, "", 1)
			return err
		}, 3},
		{"CountInstances of a broker's tenant", func() error {
			_, err := s.CountInstances(ctx, store.InstanceFilter{Broker: "b1", Tenant: "x"})
			return err
		}, 1},
		{"CountInstances of a tenant", func() error { _, err := s.CountInstances(ctx, store.InstanceFilter{Tenant: "x"}); return err }, 2},
		{"CountBindings", func() error { _, err := s.CountBindings(ctx, ""); return err }, 2},
		{"ExpiringBindings of a broker", func() error { _, err := s.ExpiringBindings(ctx, "b1", storetest.T0.AddDate(1, 0, 0), 10); return err }, 1},
		{"ExpiringBindings of all", func() error { _, err := s.ExpiringBindings(ctx, "", storetest.T0.AddDate(1, 0, 0), 10); return err }, 2},
		{"CountExpiring", func() error { _, err := s.CountExpiring(ctx, storetest.T0.AddDate(1, 0, 0)); return err }, 2},
		{"PutInstanceCancelling of a new instance without a Created", func() error {
			_, _, err := s.PutInstanceCancelling(ctx, fresh, "o-i8")
			return err
		}, 1},
		{"PutInstance without a Created over a record", func() error { _, err := s.PutInstance(ctx, fresh); return err }, 2},
		{"PutBinding without a Created, a new binding", func() error { _, err := s.PutBinding(ctx, freshB); return err }, 1},
		{"PutBinding without a Created over a record", func() error { _, err := s.PutBinding(ctx, freshB); return err }, 2},
		// A deletion reads the member, then deletes it with its usage
		// records if it did not change (usage.go).
		{"DeleteBinding", func() error { return s.DeleteBinding(ctx, "b1", "i9", "x1") }, 2},
		{"DeleteInstance", func() error { _, err := s.DeleteInstance(ctx, "b1", "i9"); return err }, 2},
		{"DeleteInstance of one without a Created", func() error { _, err := s.DeleteInstance(ctx, "b1", "i8"); return err }, 2},
	}
	// The first pass loads the scripts; the second counts.
	for pass := range 2 {
		for _, tc := range tests {
			rt.N.Store(0)
			if err := tc.call(); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := rt.N.Load(); pass == 1 && got != tc.want {
				t.Errorf("%s took %d round trips, want %d", tc.name, got, tc.want)
			}
		}
	}
	for _, name := range []string{"scan", "keys", "hscan", "zscan", "sscan"} {
		if cmds.n[name] != 0 {
			t.Errorf("the inventory sent %d %s commands, want none", cmds.n[name], name)
		}
	}
}

// TestRedisInventoryKeys checks the key layout: per broker, two sorted
// sets and the counts under one hash tag, the tag's braces escaped, an
// instance's record and its bindings' in its member.
func TestRedisInventoryKeys(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	s := openRedisAt(t, srv.StoreConfig(), osbtest.NewClock(storetest.T0).Now)
	storetest.MustPutInstance(t, s, storetest.Instance("b{1}%", "i1", "x"))
	storetest.MustPutBinding(t, s, storetest.Binding("b{1}%", "i1", "x1"))
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	keys, err := raw.Keys(ctx, s.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	tag := s.prefix + "inv:{b%7B1%7D%25}:"
	want := []string{s.prefix + "epoch", s.prefix + "inv:brokers", tag + "ex", tag + "ix", tag + "n"}
	if d := cmp.Diff(want, keys); d != "" {
		t.Errorf("keys (-want +got):\n%s", d)
	}
	if got, want := raw.ZScore(ctx, tag+"ex", "i1\x00x1").Val(), float64(storetest.T0.Add(30*24*time.Hour).UnixMicro()); got != want {
		t.Errorf("ZSCORE ex = %f, want the binding's ExpiresAt in microseconds, %f", got, want)
	}
	_, irec, err := store.PrepareInstance(storetest.Instance("b{1}%", "i1", "x"), storetest.T0)
	if err != nil {
		t.Fatal(err)
	}
	_, brec, err := store.PrepareBinding(storetest.Binding("b{1}%", "i1", "x1"), storetest.T0)
	if err != nil {
		t.Fatal(err)
	}
	u24 := func(n int) string { return string([]byte{byte(n >> 16), byte(n >> 8), byte(n)}) }
	for key, want := range map[string][]string{
		tag + "ix": {"i1\x00" + u24(len(irec)) + string(irec) + "\x00\x02x1" + u24(len(brec)) + string(brec)},
		tag + "ex": {"i1\x00x1"},
	} {
		if got := raw.ZRange(ctx, key, 0, -1).Val(); !cmp.Equal(want, got) {
			t.Errorf("ZRANGE %s = %q, want %q", key, got, want)
		}
	}
	if got := raw.HGetAll(ctx, tag+"n").Val(); !cmp.Equal(map[string]string{"x": "1", "\x00i": "1", "\x00b": "1"}, got) {
		t.Errorf("HGETALL n = %q, want the tenant's count and the broker's", got)
	}
	if _, err := s.DeleteInstance(ctx, "b{1}%", "i1"); err != nil {
		t.Fatal(err)
	}
	// Only the epoch marker, the set of brokers and the usage records are
	// left: empty hashes and sets are gone.
	keys, _ = raw.Keys(ctx, s.prefix+"*").Result()
	slices.Sort(keys)
	if !cmp.Equal([]string{s.prefix + "epoch", s.prefix + "inv:brokers", tag + "us"}, keys) {
		t.Errorf("keys after deleting everything = %q", keys)
	}
}

// TestRedisTenantFilterBudget lists a tenant whose instances are spread
// over more records than one filter script reads: pages still come whole
// and in order, the cursor carrying over.
func TestRedisTenantFilterBudget(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	s := openRedisAt(t, srv.StoreConfig(), osbtest.NewClock(storetest.T0).Now)
	var entries []store.Entry
	for i := range 2*filterBudget + 500 {
		in := storetest.Instance("b1", fmt.Sprintf("a%05d", i), "many")
		entries = append(entries, store.Entry{Instance: &in})
	}
	for _, id := range []string{"a00000x", "a03000x", "z1", "z2"} {
		in := storetest.Instance("b1", id, "few")
		entries = append(entries, store.Entry{Instance: &in})
	}
	if _, err := s.Import(ctx, entries, false); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	for {
		page, next, err := s.ListInstances(ctx, store.InstanceFilter{Broker: "b1", Tenant: "few"}, cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range page {
			got = append(got, in.InstanceID)
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	if want := []string{"a00000x", "a03000x", "z1", "z2"}; !cmp.Equal(want, got) {
		t.Errorf("listed %q, want %q", got, want)
	}
	if n, err := s.CountInstances(ctx, store.InstanceFilter{Tenant: "few"}); n != 4 || err != nil {
		t.Errorf("CountInstances(few) = %d, %v; want 4", n, err)
	}
}

// afterFirstPipeline runs after once the first pipeline it sees is done.
type afterFirstPipeline struct {
	after func()
	done  atomic.Bool
}

func (h *afterFirstPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *afterFirstPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *afterFirstPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if !h.done.Swap(true) {
			h.after()
		}
		return err
	}
}

// TestRedisPutKeepingReplacedMeanwhile: a put without a Created whose
// record another replica replaces between the script that read it and the
// one that replaces it does not write over that record: it reads again,
// keeps the Created of the record it does replace, and writes the usage
// record of that record's plan.
func TestRedisPutKeepingReplacedMeanwhile(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	clock := osbtest.NewClock(storetest.T0)
	cfg := srv.StoreConfig() // one key prefix: one store shared by two replicas
	s := openRedisAt(t, cfg, clock.Now)
	other := openRedisAt(t, cfg, clock.Now)
	in := storetest.Instance("b1", "i1", "cf1")
	storetest.MustPutInstance(t, s, in)
	clock.Advance(time.Hour)
	meanwhile := in
	meanwhile.PlanID, meanwhile.Created = "plan-3", storetest.T0.Add(time.Minute)
	h := &afterFirstPipeline{after: func() {
		storetest.MustPutInstance(t, other, meanwhile)
		clock.Advance(time.Hour)
	}}
	s.client.AddHook(h)
	cmds := &commands{n: map[string]int{}}
	s.client.AddHook(cmds)
	put := in
	put.PlanID, put.Created, put.Updated = "plan-2", time.Time{}, time.Time{}
	got := storetest.MustPutInstance(t, s, put)
	if !h.done.Load() {
		t.Fatal("the other put did not run")
	}
	if !got.Created.Equal(meanwhile.Created) {
		t.Errorf("Created %v, want %v, the Created of the record replaced", got.Created, meanwhile.Created)
	}
	// The script that found the record, the one that found another, the
	// one that replaced it.
	if n := cmds.n["evalsha"]; n != 3 {
		t.Errorf("%d scripts, want 3", n)
	}
	var used []store.UsageRecord
	for r, err := range s.UsageRecords(ctx, "", time.Time{}) {
		if err != nil {
			t.Fatal(err)
		}
		used = append(used, r)
	}
	// The other put's plan change, then this one's.
	want := []store.UsageRecord{
		{Tenant: "cf1", Broker: "b1", ServiceID: "svc-1", PlanID: "plan-1", InstanceID: "i1",
			Created: in.Created, Deleted: storetest.T0.Add(time.Hour)},
		{Tenant: "cf1", Broker: "b1", ServiceID: "svc-1", PlanID: "plan-3", InstanceID: "i1",
			Created: meanwhile.Created, Deleted: storetest.T0.Add(2 * time.Hour)},
	}
	if d := cmp.Diff(want, used); d != "" {
		t.Errorf("usage records (-want +got):\n%s", d)
	}
}
