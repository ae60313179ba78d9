package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

func TestBolt(t *testing.T) {
	storetest.Contract(t, storetest.Backend{Open: openBoltForTest, Reopen: reopenBolt})
}

func openBoltForTest(t *testing.T, now func() time.Time) store.Store {
	return openBoltAt(t, filepath.Join(t.TempDir(), "state.db"), now)
}

func openBoltAt(t testing.TB, path string, now func() time.Time) store.Store {
	t.Helper()
	s, err := Open(path, 100*time.Millisecond, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func reopenBolt(t *testing.T, s store.Store, now func() time.Time) store.Store {
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openBoltAt(t, s.(*boltStore).path, now)
}

func TestBoltRefusesOtherLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return b.Put(keyVersion, []byte("99"))
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path, store.DefaultOpenTimeout, nil); err == nil || !strings.Contains(err.Error(), `version "99"`) {
		t.Errorf("Open of a version 99 file: %v, want an error naming the version", err)
		if s != nil {
			s.Close()
		}
	}
}

// The second process is this test binary run again with childEnv set to
// what it should do, on the file named by childPathEnv.
const (
	childEnv     = "OSB_STORE_TEST_CHILD"
	childPathEnv = "OSB_STORE_TEST_PATH"
	childKey     = "b1/from-child"
)

// TestBoltChildProcess is the second process of TestBoltSecondProcess;
// run directly it does nothing.
func TestBoltChildProcess(t *testing.T) {
	path := os.Getenv(childPathEnv)
	switch os.Getenv(childEnv) {
	case "acquire": // take a lock and exit
		s := openBoltAt(t, path, time.Now)
		l := store.Lock{Key: childKey, Owner: "child", Kind: store.KindProvision, Deadline: time.Now().Add(time.Hour)}
		if _, err := s.Acquire(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	case "open": // the parent holds the file: Open must fail, quickly
		s, err := Open(path, 200*time.Millisecond, nil)
		if err == nil {
			s.Close()
			t.Fatal("opened a bolt file another process holds")
		}
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "in use by another process") {
			t.Fatalf("Open of a held file: %v, want ErrUnavailable saying it is in use", err)
		}
	}
}

// runChild runs TestBoltChildProcess in a new process doing what on path.
func runChild(t *testing.T, what, path string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestBoltChildProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+what, childPathEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child process %q: %v\n%s", what, err, out)
	}
}

func TestBoltSecondProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Run("lock taken by another process holds", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		runChild(t, "acquire", path)
		s := openBoltAt(t, path, time.Now)
		holder, err := s.Acquire(context.Background(), store.Lock{
			Key: childKey, Owner: "parent", Kind: store.KindUpdate, Deadline: time.Now().Add(time.Hour),
		})
		if !errors.Is(err, store.ErrHeld) || holder.Owner != "child" {
			t.Errorf("Acquire after the child's = %+v, %v; want ErrHeld by the child", holder, err)
		}
	})
	t.Run("file in use cannot be opened", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		openBoltAt(t, path, time.Now)
		runChild(t, "open", path)
	})
}

// TestCommitterIsolatesFailures runs writes concurrently through one
// committer, one of them failing: the others still commit.
func TestCommitterIsolatesFailures(t *testing.T) {
	s := openBoltForTest(t, time.Now).(*boltStore)
	boom := errors.New("boom")
	const writers = 50
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			errs[i] = s.commits.run(func(tx *bolt.Tx) error {
				if i == 7 {
					return boom
				}
				return tx.Bucket(bucketMeta).Put([]byte(fmt.Sprint("k", i)), []byte("v"))
			})
		})
	}
	wg.Wait()
	err := s.db.View(func(tx *bolt.Tx) error {
		for i, err := range errs {
			stored := tx.Bucket(bucketMeta).Get([]byte(fmt.Sprint("k", i))) != nil
			if want := i != 7; stored != want || (err == nil) != want {
				t.Errorf("write %d: error %v, stored %t", i, err, stored)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[7], boom) {
		t.Errorf("failing write returned %v, want boom", errs[7])
	}
}

// TestBoltOldOrphanRecord serves an orphan record written before claims
// existed.
func TestBoltOldOrphanRecord(t *testing.T) {
	s := openBoltForTest(t, osbtest.NewClock(storetest.T0).Now).(*boltStore)
	storetest.CheckOldOrphanRecord(t, s, func(rec []byte) {
		err := s.db.Update(func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketOrphanDue).Put(timeKey(storetest.T0, "old1"), nil); err != nil {
				return err
			}
			return tx.Bucket(bucketOrphans).Put([]byte("old1"), rec)
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestBoltListInstanceSeeks puts records that do not decode beside an
// instance's locks: List by instance does not read them, a full List does.
func TestBoltListInstanceSeeks(t *testing.T) {
	ctx := context.Background()
	s := openBoltForTest(t, osbtest.NewClock(storetest.T0).Now).(*boltStore)
	want := []store.Lock{
		storetest.MustAcquire(t, s, storetest.InstanceLock("b1", "i1", "", "x", time.Hour)),
		storetest.MustAcquire(t, s, storetest.InstanceLock("b1", "i1", "x1", "x", time.Hour)),
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, k := range []string{"b1/i", "b1/i1-a", "b1/i10", "b1/i2", "a/i1"} {
			if err := tx.Bucket(bucketLocks).Put([]byte(k), []byte("not json")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx, store.ListFilter{Broker: "b1", InstanceID: "i1"})
	if d := cmp.Diff(want, got); err != nil || d != "" {
		t.Errorf("List by instance = %v; diff (-want +got):\n%s", err, d)
	}
	_, err = s.List(ctx, store.ListFilter{Broker: "b1"})
	storetest.WantErr(t, "List by broker", err, store.ErrUnavailable)
}
