package bolt

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The orphan queue of the bolt backend: records by ID, and an index by
// NextAttempt that DueOrphans walks from the earliest.

func getOrphan(tx *bolt.Tx, id string) (store.Orphan, bool, error) {
	v := tx.Bucket(bucketOrphans).Get([]byte(id))
	if v == nil {
		return store.Orphan{}, false, nil
	}
	o, err := store.DecodeOrphan(v)
	return o, err == nil, err
}

func (s *boltStore) PutOrphan(ctx context.Context, o store.Orphan) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o, err := store.PrepareOrphan(o, s.now())
	if err != nil {
		return err
	}
	return s.write(ctx, func(tx *bolt.Tx) error {
		old, ok, err := getOrphan(tx, o.ID)
		if err != nil {
			return err
		}
		due := tx.Bucket(bucketOrphanDue)
		if ok {
			if err := due.Delete(timeKey(old.NextAttempt, old.ID)); err != nil {
				return err
			}
		}
		if err := due.Put(timeKey(o.NextAttempt, o.ID), nil); err != nil {
			return err
		}
		return tx.Bucket(bucketOrphans).Put([]byte(o.ID), store.EncodeOrphan(o))
	})
}

func (s *boltStore) GetOrphan(ctx context.Context, id string) (store.Orphan, error) {
	var o store.Orphan
	var found bool
	err := s.read(ctx, func(tx *bolt.Tx) error {
		var err error
		o, found, err = getOrphan(tx, id)
		return err
	})
	switch {
	case err != nil:
		return store.Orphan{}, err
	case !found:
		return store.Orphan{}, store.NoOrphan(id)
	}
	return o, nil
}

func (s *boltStore) ListOrphans(ctx context.Context) ([]store.Orphan, error) {
	var out []store.Orphan
	err := s.read(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOrphans).ForEach(func(_, v []byte) error {
			o, err := store.DecodeOrphan(v)
			out = append(out, o) // keys iterate in byte order: sorted by ID
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *boltStore) DeleteOrphan(ctx context.Context, id string) error {
	var found bool
	err := s.write(ctx, func(tx *bolt.Tx) error {
		var err error
		found, err = deleteOrphanTx(tx, id)
		return err
	})
	switch {
	case err != nil:
		return err
	case !found:
		return store.NoOrphan(id)
	}
	return nil
}

// deleteOrphanTx deletes the orphan id and its due index entry; false if
// there is none.
func deleteOrphanTx(tx *bolt.Tx, id string) (bool, error) {
	o, ok, err := getOrphan(tx, id)
	if err != nil || !ok {
		return false, err
	}
	if err := tx.Bucket(bucketOrphanDue).Delete(timeKey(o.NextAttempt, o.ID)); err != nil {
		return false, err
	}
	return true, tx.Bucket(bucketOrphans).Delete([]byte(id))
}

// DueOrphans walks the due index from the earliest; claimed orphans are
// read and skipped.
func (s *boltStore) DueOrphans(ctx context.Context, now time.Time, limit int) ([]store.Orphan, error) {
	var out []store.Orphan
	err := s.read(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketOrphanDue).Cursor()
		for k, _ := c.First(); k != nil && timeOf(k) <= now.UnixMicro(); k, _ = c.Next() {
			if limit > 0 && len(out) == limit {
				break
			}
			o, ok, err := getOrphan(tx, string(k[8:]))
			if err != nil {
				return err
			}
			if ok && !store.ClaimLive(o, now) {
				out = append(out, o) // index order: by NextAttempt, then ID
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ClaimOrphan decides inside its write transaction, so the check and the
// claim are one atomic step. NextAttempt does not change: the due index
// stays as it is.
func (s *boltStore) ClaimOrphan(ctx context.Context, id, claimant string, until time.Time) (store.Orphan, error) {
	if err := ctx.Err(); err != nil {
		return store.Orphan{}, err
	}
	now := s.now()
	until, err := store.PrepareClaim(id, claimant, until, now)
	if err != nil {
		return store.Orphan{}, err
	}
	var o store.Orphan
	var found bool
	var outcome error
	err = s.write(ctx, func(tx *bolt.Tx) error {
		var err error
		outcome = nil
		if o, found, err = getOrphan(tx, id); err != nil || !found {
			return err
		}
		if o, outcome = store.Claim(o, claimant, until, now); outcome != nil {
			return nil
		}
		return tx.Bucket(bucketOrphans).Put([]byte(id), store.EncodeOrphan(o))
	})
	switch {
	case err != nil:
		return store.Orphan{}, err
	case !found:
		return store.Orphan{}, store.NoOrphan(id)
	}
	return o, outcome
}
