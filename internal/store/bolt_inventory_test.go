package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
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
	l := testLock("i1", "owner-1", time.Hour)
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketLocks, bucketLockDeadlines, bucketOrphans, bucketOrphanDue} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketMeta).Put(keyVersion, []byte("1")); err != nil {
			return err
		}
		return putLock(tx, Lock{}, l)
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	s := openBoltAt(t, path, osbtest.NewClock(t0).Now)
	if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(l, got) {
		t.Errorf("Get of the old lock = %+v, %v", got, err)
	}
	in := mustPutInstance(t, s, testInstance("b1", "i1", "x"))
	if got, err := s.GetInstance(ctx, "b1", "i1"); err != nil || !cmp.Equal(in, got) {
		t.Errorf("GetInstance in the old file = %v; diff:\n%s", err, cmp.Diff(in, got))
	}
}

// TestBoltListByTenantSeeks puts records that do not decode under other
// tenants and brokers: a listing by tenant reads through the tenant index
// and never touches them; a listing of all does.
func TestBoltListByTenantSeeks(t *testing.T) {
	ctx := context.Background()
	s := openBoltForTest(t, osbtest.NewClock(t0).Now).(*boltStore)
	want := []Instance{
		mustPutInstance(t, s, testInstance("b1", "i1", "x")),
		mustPutInstance(t, s, testInstance("b1", "i2", "x")),
	}
	junk := []Instance{testInstance("b1", "i3", "y"), testInstance("b0", "i1", "x"), testInstance("b2", "i1", "x")}
	for _, in := range junk {
		mustPutInstance(t, s, in)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, in := range junk {
			if err := tx.Bucket(bucketInstances).Put([]byte(instanceKey(in.Broker, in.InstanceID)), []byte("junk")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := s.ListInstances(ctx, InstanceFilter{Broker: "b1", Tenant: "x"}, "", 10)
	if d := cmp.Diff(want, got); err != nil || d != "" {
		t.Errorf("ListInstances(b1, x) = %v; diff (-want +got):\n%s", err, d)
	}
	_, _, err = s.ListInstances(ctx, InstanceFilter{}, "", 10)
	wantErr(t, "ListInstances of all", err, ErrUnavailable)
}

// TestBoltDropsTenantIndex opens a file with the tenant index unreleased
// versions kept: Open deletes it, and listing by tenant needs none.
func TestBoltDropsTenantIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openBoltAt(t, path, osbtest.NewClock(t0).Now)
	mustPutInstance(t, s, testInstance("b1", "i1", "x"))
	err := s.(*boltStore).db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketTenants)
		if err != nil {
			return err
		}
		return b.Put([]byte("x\x00b1\x00i1"), nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	s = reopenBolt(t, s, osbtest.NewClock(t0).Now)
	s.(*boltStore).db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketTenants) != nil {
			t.Error("the tenant index is still there after Open")
		}
		return nil
	})
	page, _, err := s.ListInstances(ctx, InstanceFilter{Tenant: "x"}, "", 10)
	if err != nil || len(page) != 1 || page[0].InstanceID != "i1" {
		t.Errorf("ListInstances(tenant x) = %v, %v; want i1", page, err)
	}
}
