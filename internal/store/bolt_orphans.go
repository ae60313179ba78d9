package store

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The orphan queue of the bolt backend: records by ID, and an index by
// NextAttempt that DueOrphans walks from the earliest.

func getOrphan(tx *bolt.Tx, id string) (Orphan, bool, error) {
	v := tx.Bucket(bucketOrphans).Get([]byte(id))
	if v == nil {
		return Orphan{}, false, nil
	}
	o, err := DecodeOrphan(v)
	return o, err == nil, err
}

func (s *boltStore) PutOrphan(ctx context.Context, o Orphan) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o, err := PrepareOrphan(o, s.now())
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
		return tx.Bucket(bucketOrphans).Put([]byte(o.ID), EncodeOrphan(o))
	})
}

func (s *boltStore) GetOrphan(ctx context.Context, id string) (Orphan, error) {
	var o Orphan
	var found bool
	err := s.read(ctx, func(tx *bolt.Tx) error {
		var err error
		o, found, err = getOrphan(tx, id)
		return err
	})
	switch {
	case err != nil:
		return Orphan{}, err
	case !found:
		return Orphan{}, NoOrphan(id)
	}
	return o, nil
}

func (s *boltStore) ListOrphans(ctx context.Context) ([]Orphan, error) {
	var out []Orphan
	err := s.read(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOrphans).ForEach(func(_, v []byte) error {
			o, err := DecodeOrphan(v)
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
		o, ok, err := getOrphan(tx, id)
		if found = ok; err != nil || !ok {
			return err
		}
		if err := tx.Bucket(bucketOrphanDue).Delete(timeKey(o.NextAttempt, o.ID)); err != nil {
			return err
		}
		return tx.Bucket(bucketOrphans).Delete([]byte(id))
	})
	switch {
	case err != nil:
		return err
	case !found:
		return NoOrphan(id)
	}
	return nil
}

// DueOrphans walks the due index from the earliest; claimed orphans are
// read and skipped.
func (s *boltStore) DueOrphans(ctx context.Context, now time.Time, limit int) ([]Orphan, error) {
	var out []Orphan
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
			if ok && !ClaimLive(o, now) {
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
func (s *boltStore) ClaimOrphan(ctx context.Context, id, claimant string, until time.Time) (Orphan, error) {
	if err := ctx.Err(); err != nil {
		return Orphan{}, err
	}
	now := s.now()
	until, err := PrepareClaim(id, claimant, until, now)
	if err != nil {
		return Orphan{}, err
	}
	var o Orphan
	var found bool
	var outcome error
	err = s.write(ctx, func(tx *bolt.Tx) error {
		var err error
		outcome = nil
		if o, found, err = getOrphan(tx, id); err != nil || !found {
			return err
		}
		if o, outcome = Claim(o, claimant, until, now); outcome != nil {
			return nil
		}
		return tx.Bucket(bucketOrphans).Put([]byte(id), EncodeOrphan(o))
	})
	switch {
	case err != nil:
		return Orphan{}, err
	case !found:
		return Orphan{}, NoOrphan(id)
	}
	return o, outcome
}
