// Package bolt is the "bolt" backend of internal/store, the default: one
// embedded bbolt file held by one process, so that state survives a restart
// of the process (an async provision in flight still blocks an update
// after it). Concurrent writes share commits (committer). It passes
// storetest.Contract, like every backend. In this package, bolt names
// go.etcd.io/bbolt.
package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The bolt file holds JSON records in buckets, and two indexes whose keys
// start with an 8-byte big-endian time (microseconds since 1970, sign bit
// flipped so earlier sorts first):
//
//	meta            "version" -> boltVersion
//	locks           lock key -> lockRecord
//	lock_deadlines  time(Deadline) + lock key -> nothing
//	orphans         orphan id -> orphanRecord
//	orphan_due      time(NextAttempt) + orphan id -> nothing
//
// and the inventory (see inventory.go), whose keys join names and ids
// with NUL bytes (which they cannot contain), so they sort as tuples:
//
//	inv_values      seq (8-byte big-endian, from NextSequence) -> an instance's
//	                record and its bindings' seqs, or a binding's id and record
//	                (inventory_value.go)
//	inv_ids         broker NUL instance id -> seq of the instance's value (uvarint)
//	inv_counts      "i" NUL broker NUL tenant -> instances (8-byte big-endian)
//	                "b" NUL broker -> bindings (8-byte big-endian)
//	inv_expiry      time(ExpiresAt) + broker NUL instance id NUL binding id -> nothing
//	                (bindings with an ExpiresAt)
var (
	bucketMeta          = []byte("meta")
	bucketLocks         = []byte("locks")
	bucketLockDeadlines = []byte("lock_deadlines")
	bucketOrphans       = []byte("orphans")
	bucketOrphanDue     = []byte("orphan_due")
	bucketValues        = []byte("inv_values")
	bucketIDs           = []byte("inv_ids")
	bucketCounts        = []byte("inv_counts")
	bucketExpiry        = []byte("inv_expiry")
	bucketCatalogs      = []byte("catalogs") // catalog records by broker (catalog.go)
	bucketUsage         = []byte("inv_usage")
	bucketSessions      = []byte("console_sessions") // console sessions by key (session.go)
	keyVersion          = []byte("version")
)

// boltBuckets are the buckets Open creates where missing: a file written
// before the inventory existed gains its buckets, empty, and keeps its
// version.
var boltBuckets = [][]byte{
	bucketMeta, bucketLocks, bucketLockDeadlines, bucketOrphans, bucketOrphanDue,
	bucketValues, bucketIDs, bucketCounts, bucketExpiry, bucketCatalogs, bucketUsage, bucketSessions,
}

// droppedBuckets are inventory buckets of unreleased versions: a tenant
// index (inv_tenants, see inventory.go), records keyed by their ids
// (inv_instances: broker NUL instance id -> instance record; inv_bindings:
// broker NUL instance id NUL binding id -> binding record), then an
// instance's record and its bindings' in one value (inv_records: seq ->
// value), which inv_values replaced. Open deletes them, and the inventory
// buckets of today beside them, whose entries point into them (freeing
// their pages for the buckets above). No release wrote them, so their
// records are not carried over.
var droppedBuckets = [][]byte{[]byte("inv_tenants"), []byte("inv_instances"), []byte("inv_bindings"), []byte("inv_records")}

// inventoryBuckets are the inventory's buckets of today, which Open
// deletes beside droppedBuckets.
var inventoryBuckets = [][]byte{bucketValues, bucketIDs, bucketCounts, bucketExpiry, bucketUsage}

// boltVersion is the layout above; a file with another version is refused.
const boltVersion = "1"

// boltStore is the "bolt" backend, one bbolt file held by one process.
// Concurrent writes share commits (see committer); the lock bbolt takes on
// the file keeps a second process out, which is what lets Get answer for a
// key without a lock from counts kept in memory (lockKeys).
type boltStore struct {
	db      *bolt.DB
	commits *committer
	now     func() time.Time
	path    string
	keys    *lockKeys    // what Get of a key without a lock skips the file for
	closed  atomic.Bool  // set by Close: a Get that skips the file fails as a read would
	steady  store.Steady // this process's locks through a step of the wall clock
}

// boltPageSize is the page size of a new bolt file (a file keeps the one
// it was made with). The inventory's values are appended to inv_values in
// order of a sequence number, and a gateway with one operation at a time
// commits them one by one: bbolt then splits the full last page leaving at
// least two values on the next one, so each page ends about two values
// short of full. With 4 kB pages (some 13 values) that left inv_values 78%
// full; with 16 kB pages (some 50) 93%. Measured by puts of 20,000
// instances with an expiring binding each, bytes of inventory pages per
// instance (BenchmarkInventoryFootprintBolt/put): 4 kB: 1,051 from one
// writer, 929 from 64 (whose commits take many values); 16 kB: 912 from
// one, 907 from 64, 904 with the bindings put after every instance. The
// random-insert buckets (locks, inv_ids) fill the same share of larger
// pages; a commit writes 16 kB per page it changes instead of 4, which
// the fsync that follows mostly outweighs (BenchmarkAcquireRelease/bolt,
// two runs each way: 385 and 468 µs at 16 kB, 364 and 356 at 4 kB).
const boltPageSize = 16 << 10

// Open returns a Store on the bolt file at path, created if missing. now
// is the store's clock (nil means time.Now); it decides which locks have
// expired. Open waits up to openTimeout for another process to let go of
// the file (zero: without end, as bbolt does), then fails with an error
// wrapping store.ErrUnavailable. A file of another layout is refused.
func Open(path string, openTimeout time.Duration, now func() time.Time) (store.Store, error) {
	if now == nil {
		now = time.Now
	}
	s, err := open(path, openTimeout, now)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// open is Open, returning the backend's own type.
func open(path string, timeout time.Duration, now func() time.Time) (*boltStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, FreelistType: bolt.FreelistMapType,
		PageSize: boltPageSize})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: bolt file %s is in use by another process (waited %s): %w",
			store.ErrUnavailable, path, timeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open bolt file %s: %w", path, err)
	}
	keys := newLockKeys(lockKeySlots)
	err = db.Update(func(tx *bolt.Tx) error {
		if err := dropOldInventory(tx); err != nil {
			return err
		}
		for _, name := range boltBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		switch v := meta.Get(keyVersion); {
		case v == nil:
			if err := meta.Put(keyVersion, []byte(boltVersion)); err != nil {
				return err
			}
		case string(v) != boltVersion:
			return fmt.Errorf("file layout version %q, want %q", v, boltVersion)
		}
		return keys.count(tx)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: prepare bolt file %s: %w", path, err)
	}
	s := &boltStore{db: db, commits: &committer{db: db}, now: now, path: path, keys: keys}
	if err := s.adoptLocks(); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: read the locks of bolt file %s: %w", path, err)
	}
	return s, nil
}

// adoptLocks gives each lock in the file the time it has left by the
// clock now, on the monotonic clock from then on (store.Steady): a step
// of the wall clock during this process's life moves none of them.
func (s *boltStore) adoptLocks() error {
	now := s.now()
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLocks).ForEach(func(_, v []byte) error {
			l, err := store.DecodeLock(v)
			if err == nil {
				s.steady.Wrote(l, now)
			}
			return nil // a record that does not decode fails its readers, not the start
		})
	})
}

// dropOldInventory deletes the inventory if tx holds a bucket of
// droppedBuckets: those and inventoryBuckets.
func dropOldInventory(tx *bolt.Tx) error {
	if !slices.ContainsFunc(droppedBuckets, func(name []byte) bool { return tx.Bucket(name) != nil }) {
		return nil
	}
	for _, name := range slices.Concat(droppedBuckets, inventoryBuckets) {
		if tx.Bucket(name) == nil {
			continue
		}
		if err := tx.DeleteBucket(name); err != nil {
			return err
		}
	}
	return nil
}

// fail maps an error of a bbolt call: the context's error if it ended,
// otherwise a failure of the backend.
func (s *boltStore) fail(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return store.ErrClosed
	}
	return fmt.Errorf("%w: bolt file %s: %w", store.ErrUnavailable, s.path, err)
}

// write runs fn in a transaction that concurrent writes share. fn reports
// the outcome of its request (ErrHeld and the like) through variables of
// its caller and returns only storage errors, so one caller's outcome never
// rolls back the others' writes. fn may run more than once, so it must set
// those variables afresh on each run.
func (s *boltStore) write(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var ctxErr error // the context ended while the write waited: skip it
	err := s.commits.run(func(tx *bolt.Tx) error {
		if ctxErr = ctx.Err(); ctxErr != nil {
			return nil
		}
		return fn(tx)
	})
	if err == nil && ctxErr != nil {
		return ctxErr
	}
	return s.fail(ctx, err)
}

// read runs fn in a read-only transaction.
func (s *boltStore) read(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.fail(ctx, s.db.View(fn))
}

// timeKey is the 8-byte index prefix for t followed by name.
func timeKey(t time.Time, name string) []byte {
	k := make([]byte, 8, 8+len(name))
	binary.BigEndian.PutUint64(k, uint64(t.UnixMicro())^(1<<63))
	return append(k, name...)
}

// timeOf is the time of an index key made by timeKey, in microseconds.
func timeOf(k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k[:8]) ^ (1 << 63))
}

func getLock(tx *bolt.Tx, key string) (store.Lock, bool, error) {
	v := tx.Bucket(bucketLocks).Get([]byte(key))
	if v == nil {
		return store.Lock{}, false, nil
	}
	l, err := store.DecodeLock(v)
	return l, err == nil, err
}

// liveLock returns the lock key if it exists and has not expired at now.
func (s *boltStore) liveLock(tx *bolt.Tx, key string, now time.Time) (store.Lock, bool, error) {
	l, ok, err := getLock(tx, key)
	if err != nil || !ok {
		return store.Lock{}, false, err
	}
	if l, expired := s.steady.Judge(l, now); !expired {
		return l, true, nil
	}
	return store.Lock{}, false, nil
}

// putLock writes l, replacing old (the zero Lock if there was none).
func (s *boltStore) putLock(tx *bolt.Tx, old, l store.Lock) error {
	if old.Key != "" {
		if err := tx.Bucket(bucketLockDeadlines).Delete(timeKey(old.Deadline, old.Key)); err != nil {
			return err
		}
	}
	if err := tx.Bucket(bucketLockDeadlines).Put(timeKey(l.Deadline, l.Key), nil); err != nil {
		return err
	}
	return s.keys.put(tx.Bucket(bucketLocks), []byte(l.Key), store.EncodeLock(l))
}

func (s *boltStore) deleteLock(tx *bolt.Tx, l store.Lock) error {
	if err := tx.Bucket(bucketLockDeadlines).Delete(timeKey(l.Deadline, l.Key)); err != nil {
		return err
	}
	return s.keys.delete(tx, tx.Bucket(bucketLocks), []byte(l.Key))
}

// ownedLock returns the live lock key if owner holds it, or in outcome the
// error saying why not.
func (s *boltStore) ownedLock(tx *bolt.Tx, key, owner string, now time.Time) (l store.Lock, outcome, err error) {
	l, ok, err := s.liveLock(tx, key, now)
	switch {
	case err != nil:
		return store.Lock{}, nil, err
	case !ok:
		return store.Lock{}, store.NoLock(key), nil
	case l.Owner != owner:
		return store.Lock{}, fmt.Errorf("%w: lock %s", store.ErrNotOwner, key), nil
	}
	return l, nil, nil
}

func (s *boltStore) Ping(ctx context.Context) error {
	return s.read(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bucketLocks) == nil {
			return errors.New("bucket locks missing")
		}
		return nil
	})
}

func (s *boltStore) Close() error {
	s.closed.Store(true)
	return s.db.Close()
}
