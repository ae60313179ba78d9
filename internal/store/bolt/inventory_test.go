package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// TestBoltFileBeforeInventory opens a file written before the inventory
// existed (its five buckets, version 1): it gains the inventory's buckets
// and keeps its locks.
func TestBoltFileBeforeInventory(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := storetest.Lock("i1", "owner-1", time.Hour)
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketLocks, bucketLockDeadlines, bucketOrphans, bucketOrphanDue} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketMeta).Put(keyVersion, []byte("1")); err != nil {
			return err
		}
		return (&boltStore{keys: newLockKeys(1)}).putLock(tx, store.Lock{}, l) // counted by the store that opens the file
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	s := openBoltAt(t, path, osbtest.NewClock(storetest.T0).Now)
	if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(l, got) {
		t.Errorf("Get of the old lock = %+v, %v", got, err)
	}
	in := storetest.MustPutInstance(t, s, storetest.Instance("b1", "i1", "x"))
	if got, err := s.GetInstance(ctx, "b1", "i1"); err != nil || !cmp.Equal(in, got) {
		t.Errorf("GetInstance in the old file = %v; diff:\n%s", err, cmp.Diff(in, got))
	}
}

// TestBoltListByTenantSeeks puts values that do not decode under other
// tenants and brokers: a listing by broker and tenant seeks to the broker
// and skips what does not name the tenant without decoding it; a listing
// of all decodes them.
func TestBoltListByTenantSeeks(t *testing.T) {
	ctx := context.Background()
	s := openBoltForTest(t, osbtest.NewClock(storetest.T0).Now).(*boltStore)
	want := []store.Instance{
		storetest.MustPutInstance(t, s, storetest.Instance("b1", "i1", "x")),
		storetest.MustPutInstance(t, s, storetest.Instance("b1", "i2", "x")),
	}
	junk := []store.Instance{storetest.Instance("b1", "i3", "y"), storetest.Instance("b0", "i1", "x"), storetest.Instance("b2", "i1", "x")}
	for _, in := range junk {
		storetest.MustPutInstance(t, s, in)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, in := range junk {
			seq, _ := idSeq(tx.Bucket(bucketIDs).Get([]byte(store.InstanceKey(in.Broker, in.InstanceID))))
			if err := tx.Bucket(bucketValues).Put(seq, []byte("junk")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.ListInstances(ctx, store.InstanceFilter{Broker: "b1", Tenant: "x"}, "", 10)
	if d := cmp.Diff(want, got); err != nil || d != "" {
		t.Errorf("ListInstances(b1, x) = %v; diff (-want +got):\n%s", err, d)
	}
	_, _, err = s.ListInstances(ctx, store.InstanceFilter{}, "", 10)
	storetest.WantErr(t, "ListInstances of all", err, store.ErrUnavailable)
}

// TestBoltDropsOldBuckets opens files holding a bucket of an unreleased
// layout (a tenant index, records keyed by their ids, instances' values
// with their bindings' records): Open deletes it and the inventory beside
// it, whose entries point into it, and keeps the rest of the file.
func TestBoltDropsOldBuckets(t *testing.T) {
	ctx := context.Background()
	for _, old := range droppedBuckets {
		t.Run(string(old), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			clock := osbtest.NewClock(storetest.T0)
			s := openBoltAt(t, path, clock.Now)
			storetest.MustPutInstance(t, s, storetest.Instance("b1", "i1", "x"))
			storetest.MustPutBinding(t, s, storetest.Binding("b1", "i1", "k1"))
			l, err := s.Acquire(ctx, storetest.Lock("i1", "owner-1", time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			err = s.(*boltStore).db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket(old)
				if err != nil {
					return err
				}
				return b.Put([]byte("b1\x00i2"), []byte("old"))
			})
			if err != nil {
				t.Fatal(err)
			}
			s = reopenBolt(t, s, clock.Now)
			s.(*boltStore).db.View(func(tx *bolt.Tx) error {
				for _, name := range droppedBuckets {
					if tx.Bucket(name) != nil {
						t.Errorf("bucket %s is still there after Open", name)
					}
				}
				return nil
			})
			page, _, err := s.ListInstances(ctx, store.InstanceFilter{}, "", 10)
			if err != nil || len(page) != 0 {
				t.Errorf("ListInstances = %v, %v; want none", page, err)
			}
			for name, count := range map[string]func() (int, error){
				"CountInstances": func() (int, error) { return s.CountInstances(ctx, store.InstanceFilter{}) },
				"CountBindings":  func() (int, error) { return s.CountBindings(ctx, "") },
			} {
				if n, err := count(); err != nil || n != 0 {
					t.Errorf("%s = %d, %v; want 0", name, n, err)
				}
			}
			if got, err := s.CountExpiring(ctx, storetest.T0.Add(1000*time.Hour)); err != nil || len(got) != 0 {
				t.Errorf("CountExpiring = %v, %v; want none", got, err)
			}
			if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(l, got) {
				t.Errorf("Get of the lock = %+v, %v", got, err)
			}
			storetest.MustPutInstance(t, s, storetest.Instance("b1", "i1", "x"))
		})
	}
}

// TestBoltRecordsInPlace checks the layout: an instance's value is
// appended under the next sequence number when the inventory first sees
// the instance (by its record or a binding), a binding's value when the
// inventory first sees the binding (before its instance's value, if that
// is new), and later puts rewrite them under their numbers; deleting the
// instance removes its value and its bindings', deleting the last binding
// of an instance without a record its value and its id.
func TestBoltRecordsInPlace(t *testing.T) {
	ctx := context.Background()
	s := openBoltForTest(t, osbtest.NewClock(storetest.T0).Now).(*boltStore)
	storetest.MustPutInstance(t, s, storetest.Instance("b1", "i2", "x"))
	storetest.MustPutBinding(t, s, storetest.Binding("b1", "i1", "k1"))
	storetest.MustPutInstance(t, s, storetest.Instance("b1", "i1", "x"))
	storetest.MustPutBinding(t, s, storetest.Binding("b1", "i2", "k1"))
	storetest.MustPutBinding(t, s, storetest.Binding("b0", "i3", "k1"))
	storetest.MustPutInstance(t, s, storetest.Instance("b1", "i2", "y"))
	storetest.MustPutBinding(t, s, storetest.Binding("b1", "i1", "k1"))
	layout := func() map[string]uint64 {
		got := map[string]uint64{}
		s.db.View(func(tx *bolt.Tx) error {
			records := tx.Bucket(bucketValues)
			tx.Bucket(bucketIDs).ForEach(func(k, v []byte) error {
				n, _ := binary.Uvarint(v)
				name := strings.ReplaceAll(string(k), "\x00", "/")
				got[name] = n
				p := records.Get(seqKey(n))
				if p == nil {
					t.Errorf("%q: no value under %d", k, n)
					return nil
				}
				bv, err := parseBoltValue(name, p)
				if err != nil {
					t.Errorf("%q: %v", k, err)
				}
				for _, n := range bv.bindings {
					bid, _, ok := parseBindingValue(records.Get(seqKey(n)))
					if !ok {
						t.Errorf("%q: no binding value under %d", k, n)
					}
					got[name+"/"+string(bid)] = n
				}
				return nil
			})
			if n := records.Stats().KeyN; n != len(got) {
				t.Errorf("%d values for %d instances and bindings", n, len(got))
			}
			return nil
		})
		return got
	}
	want := map[string]uint64{"b1/i2": 1, "b1/i1/k1": 2, "b1/i1": 3, "b1/i2/k1": 4, "b0/i3/k1": 5, "b0/i3": 6}
	if d := cmp.Diff(want, layout()); d != "" {
		t.Errorf("ids -> sequence numbers (-want +got):\n%s", d)
	}
	if _, err := s.DeleteInstance(ctx, "b1", "i2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBinding(ctx, "b0", "i3", "k1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBinding(ctx, "b1", "i1", "k1"); err != nil {
		t.Fatal(err)
	}
	want = map[string]uint64{"b1/i1": 3}
	if d := cmp.Diff(want, layout()); d != "" {
		t.Errorf("after the deletes, ids -> sequence numbers (-want +got):\n%s", d)
	}
}

// TestBoltMissingBindingValue deletes a binding's value behind the
// store's back: reads of the binding, or of all its instance's, fail as
// unavailable rather than skip it.
func TestBoltMissingBindingValue(t *testing.T) {
	ctx := context.Background()
	s := openBoltForTest(t, osbtest.NewClock(storetest.T0).Now).(*boltStore)
	storetest.MustPutInstance(t, s, storetest.Instance("b1", "i1", "x"))
	storetest.MustPutBinding(t, s, storetest.Binding("b1", "i1", "k1"))
	err := s.db.Update(func(tx *bolt.Tx) error {
		v, _, _, err := inventoryTx(tx).value("b1", "i1")
		if err != nil || len(v.bindings) != 1 {
			return fmt.Errorf("value of b1/i1 = %+v, %v", v, err)
		}
		return tx.Bucket(bucketValues).Delete(seqKey(v.bindings[0]))
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.GetBinding(ctx, "b1", "i1", "k1")
	storetest.WantErr(t, "GetBinding", err, store.ErrUnavailable)
	_, err = s.ListBindings(ctx, "b1", "i1")
	storetest.WantErr(t, "ListBindings", err, store.ErrUnavailable)
	_, err = s.DeleteInstance(ctx, "b1", "i1")
	storetest.WantErr(t, "DeleteInstance", err, store.ErrUnavailable)
}
