package bolt

import (
	"hash/maphash"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// lockKeys counts the keys of the bolt file's locks bucket by a hash of
// the key, so that Get of a key no lock has (every last_operation poll of
// an operation the gateway does not track) answers without a read
// transaction. It is not a cache of locks: it answers only "no lock can
// have this key", and every other Get reads the file as before.
//
// Why a zero count is never wrong: the count of a slot is at least the
// number of keys in the committed locks bucket that hash to it, at every
// moment. It starts exact (counted when the file is opened, in the
// transaction that opens it). putLock adds one for a key the bucket does
// not hold yet before the transaction that writes it commits, and
// deleteLock takes one away for a key it removes only once that
// transaction has committed (bolt.Tx.OnCommit); a transaction that rolls
// back keeps an addition (the count errs high: that slot's Gets read the
// file) and drops its removals. Only this process writes the file (bolt
// locks it against other processes), and putLock and deleteLock are the
// only writers of the bucket. So when a Get loads zero, no committed lock
// has the key at that moment, and ErrNotFound is what a read transaction
// begun then would have answered. (A shared store, Redis, has no such
// filter: other replicas write it.)
// Its gain is measured at locks.go's Get.
type lockKeys struct {
	seed  maphash.Seed
	slots []atomic.Uint32 // a power of two of them
}

// lockKeySlots is the number of counters: 256 kB, few enough collisions
// (each costs a read transaction) for tens of thousands of locks.
const lockKeySlots = 1 << 16

func newLockKeys(n int) *lockKeys {
	return &lockKeys{seed: maphash.MakeSeed(), slots: make([]atomic.Uint32, n)}
}

func (k *lockKeys) slot(key []byte) *atomic.Uint32 {
	return &k.slots[maphash.Bytes(k.seed, key)&uint64(len(k.slots)-1)]
}

// mayHold reports whether a lock may have key; false means none has.
func (k *lockKeys) mayHold(key string) bool {
	return k.slots[maphash.String(k.seed, key)&uint64(len(k.slots)-1)].Load() != 0
}

// count counts the keys of the locks bucket in tx; call it once, in the
// transaction that opens the file, before any Get.
func (k *lockKeys) count(tx *bolt.Tx) error {
	return tx.Bucket(bucketLocks).ForEach(func(key, _ []byte) error {
		k.slot(key).Add(1)
		return nil
	})
}

// put writes v under key in the locks bucket b of tx, counting a new key
// before the write can commit.
func (k *lockKeys) put(b *bolt.Bucket, key, v []byte) error {
	if b.Get(key) == nil {
		k.slot(key).Add(1)
	}
	return b.Put(key, v)
}

// delete removes key from the locks bucket b of tx, uncounting it once tx
// has committed.
func (k *lockKeys) delete(tx *bolt.Tx, b *bolt.Bucket, key []byte) error {
	if b.Get(key) != nil {
		s := k.slot(key)
		tx.OnCommit(func() { s.Add(^uint32(0)) })
	}
	return b.Delete(key)
}
