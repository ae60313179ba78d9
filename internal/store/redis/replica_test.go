package redis

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// TestReplicaAcks: with state.redis.replica_acks 1, each write a promise
// rests on (acquire, update, an inventory record, an orphan) comes back
// only once the replica has it — read back from the replica; with the
// replica paused (cut off, lagging) each is ErrUnavailable, the answer of
// a store that does not answer, while releases and reads go on; once the
// replica is back, writes count again. Without replica_acks a paused
// replica changes nothing (replication stays asynchronous).
func TestReplicaAcks(t *testing.T) {
	primary := storetest.StartRedis(t)
	replica := storetest.StartRedisReplica(t, primary)
	now := osbtest.NewClock(storetest.T0).Now
	ctx := context.Background()
	open := func(acks int, timeout time.Duration) *redisStore {
		cfg := primary.StoreConfig()
		cfg.Redis.ReplicaAcks, cfg.Redis.ReplicaAckTimeout = acks, timeout
		return openRedisAt(t, cfg, now)
	}
	onReplica := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { onReplica.Close() })
	has := func(key string) bool {
		n, err := onReplica.Exists(ctx, key).Result()
		return err == nil && n == 1
	}

	// The replica up: a patient wait, answered as soon as it has the write.
	s := open(1, time.Minute)
	l := storetest.MustAcquire(t, s, storetest.Lock("i1", "owner-1", time.Hour))
	if !has(s.lockKey(l.Key)) {
		t.Errorf("the replica lacks the lock once Acquire returned")
	}
	l.Operation = "op-1"
	if err := s.Update(ctx, l); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if v, _ := onReplica.Get(ctx, s.lockKey(l.Key)).Result(); !strings.Contains(v, "op-1") {
		t.Errorf("the replica's lock after Update: %q", v)
	}
	if _, err := s.PutInstance(ctx, storetest.Instance("b1", "i1", "cf1")); err != nil {
		t.Fatalf("PutInstance: %v", err)
	}
	if !has(s.inv("b1").ix) {
		t.Errorf("the replica lacks the inventory record once PutInstance returned")
	}
	if _, err := s.PutBinding(ctx, storetest.Binding("b1", "i1", "bd1")); err != nil {
		t.Fatalf("PutBinding: %v", err)
	}
	if err := s.PutOrphan(ctx, storetest.Orphan("o1", storetest.T0)); err != nil {
		t.Fatalf("PutOrphan: %v", err)
	}
	if !has(s.orphansKey()) {
		t.Errorf("the replica lacks the orphan once PutOrphan returned")
	}
	// A provision's record and the cancellation of its orphan come back
	// once the replica has both; the lock and read of AcquireReading once
	// it has the lock.
	keep := storetest.Instance("b1", "i6", "cf1")
	keep.Created = time.Time{}
	if _, cancelled, err := s.PutInstanceCancelling(ctx, keep, "o1"); err != nil || !cancelled {
		t.Fatalf("PutInstanceCancelling: cancelled %v, %v", cancelled, err)
	}
	if has(s.orphansKey()) {
		t.Errorf("the replica still has the orphan once PutInstanceCancelling returned")
	}
	if _, rec, err := s.AcquireReading(ctx, storetest.Lock("i6", "owner-6", time.Hour)); err != nil || rec == nil {
		t.Fatalf("AcquireReading: record %v, %v", rec, err)
	}
	if !has(s.lockKey(store.LockKey("b1", "i6"))) {
		t.Errorf("the replica lacks the lock once AcquireReading returned")
	}

	// The replica paused: nothing is acknowledged within the timeout.
	replica.Pause()
	short := open(1, 200*time.Millisecond)
	unacked := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "0 of the 1 replicas") {
			t.Errorf("%s with the replica paused: %v, want ErrUnavailable naming the missing acknowledgement", what, err)
		}
	}
	_, err := short.Acquire(ctx, storetest.Lock("i2", "owner-2", time.Hour))
	unacked("Acquire of a free lock", err)
	_, err = short.Acquire(ctx, storetest.Lock("i1", "owner-1", time.Hour)) // the script's path: held by the same owner
	unacked("Acquire of a held lock", err)
	unacked("Update", short.Update(ctx, l))
	_, err = short.PutInstance(ctx, storetest.Instance("b1", "i3", "cf1"))
	unacked("PutInstance", err)
	_, err = short.PutBinding(ctx, storetest.Binding("b1", "i1", "bd2"))
	unacked("PutBinding", err)
	unacked("PutOrphan", short.PutOrphan(ctx, storetest.Orphan("o2", storetest.T0)))
	_, _, err = short.PutInstanceCancelling(ctx, keep, "o2")
	unacked("PutInstanceCancelling", err)
	_, _, err = short.AcquireReading(ctx, storetest.Lock("i7", "owner-7", time.Hour))
	unacked("AcquireReading", err)
	if _, err := short.Get(ctx, l.Key); err != nil {
		t.Errorf("Get with the replica paused: %v", err)
	}
	if err := short.Release(ctx, store.LockKey("b1", "i2"), "owner-2"); err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Release with the replica paused: %v", err)
	}
	// Without replica_acks the paused replica changes nothing.
	async := open(0, 0)
	storetest.MustAcquire(t, async, storetest.Lock("i4", "owner-4", time.Hour))
	if _, err := async.PutInstance(ctx, storetest.Instance("b1", "i4", "cf1")); err != nil {
		t.Errorf("PutInstance without replica_acks: %v", err)
	}

	// The replica back: writes count again.
	replica.Resume()
	storetest.MustAcquire(t, s, storetest.Lock("i5", "owner-5", time.Hour))
}

// TestReplicaAcksRemovals: with replica_acks, the removal of an inventory
// record (and of an orphan, a provision's success cancelling it) waits for the replica as its write did. A removal the promoted
// replica lacks would bring back the record of an instance the platform
// was told is gone, which nothing deletes again (the failover campaign's
// (h): the inventory records what the broker no longer holds).
func TestReplicaAcksRemovals(t *testing.T) {
	primary := storetest.StartRedis(t)
	replica := storetest.StartRedisReplica(t, primary)
	now := osbtest.NewClock(storetest.T0).Now
	ctx := context.Background()
	base := primary.StoreConfig() // one key prefix for both stores below
	open := func(timeout time.Duration) *redisStore {
		cfg := base
		cfg.Redis.ReplicaAcks, cfg.Redis.ReplicaAckTimeout = 1, timeout
		return openRedisAt(t, cfg, now)
	}
	onReplica := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { onReplica.Close() })
	s := open(time.Minute)
	for _, id := range []string{"i1", "i2"} {
		if _, err := s.PutInstance(ctx, storetest.Instance("b1", id, "cf1")); err != nil {
			t.Fatalf("PutInstance %s: %v", id, err)
		}
		if _, err := s.PutBinding(ctx, storetest.Binding("b1", id, "bd1")); err != nil {
			t.Fatalf("PutBinding %s: %v", id, err)
		}
	}
	// on the replica, the instance's member of the inventory index
	onReplicaHas := func(id string) (instance, binding bool) {
		r := lookupRange(id + "\x00")
		raw, err := onReplica.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.inv("b1").ix, Start: r.Min, Stop: r.Max, ByLex: true, Count: r.Count}).Result()
		if err != nil || len(raw) == 0 {
			return false, false
		}
		m, err := store.ParseMember(raw[0])
		if err != nil {
			t.Fatalf("the replica's member of %s: %v", id, err)
		}
		return len(m.Instance) > 0, m.Binding("bd1") >= 0
	}

	// The replica up: each removal returns once the replica has it.
	if err := s.DeleteBinding(ctx, "b1", "i1", "bd1"); err != nil {
		t.Fatalf("DeleteBinding: %v", err)
	}
	if _, binding := onReplicaHas("i1"); binding {
		t.Errorf("the replica still has the binding once DeleteBinding returned")
	}
	if _, err := s.DeleteInstance(ctx, "b1", "i1"); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	if instance, _ := onReplicaHas("i1"); instance {
		t.Errorf("the replica still has the instance once DeleteInstance returned")
	}

	for _, id := range []string{"o1", "o2"} {
		if err := s.PutOrphan(ctx, storetest.Orphan(id, storetest.T0)); err != nil {
			t.Fatalf("PutOrphan %s: %v", id, err)
		}
	}
	if err := s.DeleteOrphan(ctx, "o1"); err != nil {
		t.Fatalf("DeleteOrphan: %v", err)
	}
	if has, _ := onReplica.HExists(ctx, s.orphansKey(), "o1").Result(); has {
		t.Errorf("the replica still has the orphan once DeleteOrphan returned")
	}

	// The replica paused: a removal is not acknowledged, and says so.
	replica.Pause()
	short := open(200 * time.Millisecond)
	unacked := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "0 of the 1 replicas") {
			t.Errorf("%s with the replica paused: %v, want ErrUnavailable naming the missing acknowledgement", what, err)
		}
	}
	unacked("DeleteBinding", short.DeleteBinding(ctx, "b1", "i2", "bd1"))
	unacked("DeleteOrphan", short.DeleteOrphan(ctx, "o2"))
	replica.Resume()
	_, err := short.DeleteInstance(ctx, "b1", "i2") // the binding went on the primary; the instance goes now
	if err != nil {
		t.Errorf("DeleteInstance with the replica back: %v", err)
	}
}
