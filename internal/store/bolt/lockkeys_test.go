package bolt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// TestBoltGetMissingReadsNoFile: a Get of a key no lock has answers from
// the key counts, without a read transaction; a Get of a held key still
// reads the file.
func TestBoltGetMissingReadsNoFile(t *testing.T) {
	ctx := context.Background()
	s := openBoltForTest(t, osbtest.NewClock(storetest.T0).Now).(*boltStore)
	l := storetest.MustAcquire(t, s, storetest.Lock("held", "owner-1", time.Hour))
	before := s.db.Stats().TxN
	if _, err := s.Get(ctx, store.LockKey("b1", "missing")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
	}
	if n := s.db.Stats().TxN - before; n != 0 {
		t.Errorf("Get of a missing key began %d read transactions, want 0", n)
	}
	if got, err := s.Get(ctx, l.Key); err != nil || got.Owner != "owner-1" {
		t.Fatalf("Get of a held key = %+v, %v", got, err)
	}
	if n := s.db.Stats().TxN - before; n != 1 {
		t.Errorf("Get of a held key began %d read transactions, want 1", n)
	}
}

// TestBoltGetMissingAfterClose: a Get that skips the file fails on a
// closed store as a read would, and with the context's error first.
func TestBoltGetMissingAfterClose(t *testing.T) {
	s := openBoltForTest(t, osbtest.NewClock(storetest.T0).Now)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Get(canceled, store.LockKey("b1", "missing")); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a canceled context: %v, want context.Canceled", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(context.Background(), store.LockKey("b1", "missing")); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Get on a closed store: %v, want ErrUnavailable", err)
	}
}

// withFewSlots makes s count its keys in n slots, so that keys share
// slots and the counts are tested where they collide.
func withFewSlots(t *testing.T, s *boltStore, n int) {
	t.Helper()
	keys := newLockKeys(n)
	if err := s.db.View(keys.count); err != nil {
		t.Fatal(err)
	}
	s.keys = keys
}

// fileGet is Get by a read transaction, as it was before the key counts.
func fileGet(s *boltStore, key string, now time.Time) (found bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		_, found, err = s.liveLock(tx, key, now)
		return err
	})
	return found, err
}

// TestBoltLockKeysAgreeWithFile runs random acquires, updates, releases,
// forced releases and expiries on a few keys sharing four slots, and after
// each checks every key's Get against a read of the file.
func TestBoltLockKeysAgreeWithFile(t *testing.T) {
	ctx := context.Background()
	clock := osbtest.NewClock(storetest.T0)
	s := openBoltForTest(t, clock.Now).(*boltStore)
	withFewSlots(t, s, 4)
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7"}
	owners := map[string]string{}
	for step := range 2000 {
		id := ids[rng.IntN(len(ids))]
		key := store.LockKey("b1", id)
		switch op := rng.IntN(6); op {
		case 0, 1:
			owner := fmt.Sprintf("o%d", step)
			if _, err := s.Acquire(ctx, testLockAt(id, owner, clock.Now(), time.Duration(1+rng.IntN(5))*time.Second)); err == nil {
				owners[key] = owner
			}
		case 2:
			if o, ok := owners[key]; ok {
				_ = s.Update(ctx, testLockAt(id, o, clock.Now(), time.Duration(1+rng.IntN(5))*time.Second))
			}
		case 3:
			_ = s.Release(ctx, key, owners[key])
		case 4:
			_, _ = s.ForceRelease(ctx, key)
		case 5:
			clock.Advance(time.Second)
			if _, err := s.ExpireDue(ctx, clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if step%500 == 0 {
			s = reopenBolt(t, s, clock.Now).(*boltStore)
			withFewSlots(t, s, 4)
		}
		for _, id := range ids {
			key := store.LockKey("b1", id)
			want, err := fileGet(s, key, clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Get(ctx, key)
			if got := err == nil; got != want || err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("step %d: Get(%s) = %v; the file holds a live lock: %v", step, key, err, want)
			}
		}
	}
}

// testLockAt is testLock started at now.
func testLockAt(id, owner string, now time.Time, ttl time.Duration) store.Lock {
	l := storetest.Lock(id, owner, ttl)
	l.Started, l.Deadline = now, now.Add(ttl)
	return l
}

// TestBoltLockKeysConcurrent: writers acquire and release locks of their
// own while others do the same on keys sharing their slots, in shared
// commits; a lock a writer holds is always found by Get, and one it
// released is not.
func TestBoltLockKeysConcurrent(t *testing.T) {
	ctx := context.Background()
	s := openBoltForTest(t, time.Now).(*boltStore)
	withFewSlots(t, s, 2)
	const writers, rounds = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				id := fmt.Sprintf("w%d-%d", w, r%3)
				key := store.LockKey("b1", id)
				owner := fmt.Sprintf("o%d-%d", w, r)
				l := storetest.Lock(id, owner, time.Hour)
				l.Started, l.Deadline = time.Now(), time.Now().Add(time.Hour)
				if _, err := s.Acquire(ctx, l); err != nil {
					errs <- fmt.Errorf("Acquire(%s): %w", key, err)
					return
				}
				if got, err := s.Get(ctx, key); err != nil || got.Owner != owner {
					errs <- fmt.Errorf("Get(%s) of a held lock = %+v, %v", key, got, err)
					return
				}
				if err := s.Release(ctx, key, owner); err != nil {
					errs <- fmt.Errorf("Release(%s): %w", key, err)
					return
				}
				if _, err := s.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
					errs <- fmt.Errorf("Get(%s) of a released lock: %v, want ErrNotFound", key, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range s.keys.slots {
		if n := s.keys.slots[i].Load(); n != 0 {
			t.Errorf("slot %d counts %d keys after every lock was released, want 0", i, n)
		}
	}
}

// TestBoltLockKeysWithinTransactions: puts and deletes of one key in one
// transaction, and a transaction that rolls back, leave the count at no
// fewer than the file's keys, and Get answering as the file does.
func TestBoltLockKeysWithinTransactions(t *testing.T) {
	ctx := context.Background()
	s := openBoltForTest(t, osbtest.NewClock(storetest.T0).Now).(*boltStore)
	l := storetest.Lock("i1", "owner-1", time.Hour)
	k := []byte(l.Key)
	count := func() uint32 { return s.keys.slot(k).Load() }
	found := func() bool {
		_, err := s.Get(ctx, l.Key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	update := func(fn func(tx *bolt.Tx) error) error { return s.db.Update(fn) }

	errRollback := errors.New("roll back")
	if err := update(func(tx *bolt.Tx) error {
		if err := s.putLock(tx, store.Lock{}, l); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if found() || count() != 1 {
		t.Errorf("after a put rolled back: found %v, count %d; want not found, count 1 (high, never low)", found(), count())
	}

	if err := update(func(tx *bolt.Tx) error {
		if err := s.putLock(tx, store.Lock{}, l); err != nil {
			return err
		}
		return s.deleteLock(tx, l)
	}); err != nil {
		t.Fatal(err)
	}
	if found() || count() != 1 {
		t.Errorf("after a put and a delete in one transaction: found %v, count %d; want not found, count 1", found(), count())
	}

	storetest.MustAcquire(t, s, l)
	if !found() || count() != 2 {
		t.Errorf("after Acquire: found %v, count %d; want found, count 2", found(), count())
	}
	if err := update(func(tx *bolt.Tx) error {
		if err := s.deleteLock(tx, l); err != nil {
			return err
		}
		return s.putLock(tx, store.Lock{}, l)
	}); err != nil {
		t.Fatal(err)
	}
	if !found() || count() != 2 {
		t.Errorf("after a delete and a put in one transaction: found %v, count %d; want found, count 2", found(), count())
	}

	if err := update(func(tx *bolt.Tx) error {
		if err := s.deleteLock(tx, l); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	if !found() || count() != 2 {
		t.Errorf("after a delete rolled back: found %v, count %d; want found, count 2", found(), count())
	}
	if err := s.Release(ctx, l.Key, l.Owner); err != nil {
		t.Fatal(err)
	}
	if found() || count() != 1 {
		t.Errorf("after Release: found %v, count %d; want not found, count 1", found(), count())
	}
	s = reopenBolt(t, s, osbtest.NewClock(storetest.T0).Now).(*boltStore)
	if found() || count() != 0 {
		t.Errorf("after reopening: found %v, count %d; want not found, count 0 (counted afresh)", found(), count())
	}
}
