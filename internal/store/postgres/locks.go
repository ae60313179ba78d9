package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The lock methods of the postgres backend. Acquire is one statement when
// it gets the lock: an INSERT whose ON CONFLICT update applies only when
// the holder's deadline has passed at the store's now or the owner is the
// same, keeping the replaced record of another owner in the row's
// replaced column to RETURN it. Only when the lock is held does a second
// statement read the holder. Each other change is one statement whose
// WHERE carries the check.

const acquireSQL = `INSERT INTO locks AS l (key, owner, deadline_us, rec) VALUES ($1, $2, $3, $4)
ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, deadline_us = excluded.deadline_us, rec = excluded.rec,
	replaced = CASE WHEN l.owner <> excluded.owner THEN l.rec END
WHERE l.deadline_us <= $5 OR l.owner = excluded.owner
RETURNING replaced`

// acquireTries bounds Acquire's rounds when the holder it found went away
// before it could read it.
const acquireTries = 3

func (s *pgStore) Acquire(ctx context.Context, l store.Lock) (store.Lock, error) {
	if err := ctx.Err(); err != nil {
		return store.Lock{}, err
	}
	now := s.now()
	l, err := store.PrepareLock(l, now)
	if err != nil {
		return store.Lock{}, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Lock{}, err
	}
	defer cancel()
	rec := store.EncodeLock(l)
	for range acquireTries {
		var replaced []byte
		err := s.db.QueryRow(cctx, acquireSQL, b(l.Key), b(l.Owner), us(l.Deadline), rec, us(now)).Scan(&replaced)
		switch {
		case err == nil:
			if replaced != nil {
				if old, err := store.DecodeLock(replaced); err == nil {
					l.Replaced = &old // expired: taken over
				}
			}
			return l, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return store.Lock{}, s.fail(ctx, "acquire", err)
		}
		// Held: read the holder. It may be gone (released, or expired) by
		// now; then try again.
		holder, found, err := s.getLock(cctx, ctx, l.Key, now, false)
		if err != nil {
			return store.Lock{}, err
		}
		if found && holder.Owner != l.Owner {
			return holder, store.HeldError(holder)
		}
	}
	return store.Lock{}, fmt.Errorf("%w: lock %s: the holder changed %d times while acquiring", store.ErrUnavailable, l.Key, acquireTries)
}

// AcquireReading sends acquireSQL and the instance record's SELECT in
// one batch: one round trip and one implicit transaction, so a SELECT
// that fails takes the acquire back. The SELECT takes its snapshot after
// the INSERT ran (READ COMMITTED: one per statement), so it sees the
// record of an operation that released the lock before. A lock held is
// read as Acquire reads it, in a second statement; a holder gone by then
// leaves it to Acquire and GetInstance.
func (s *pgStore) AcquireReading(ctx context.Context, l store.Lock) (store.Lock, *store.Instance, error) {
	now := s.now()
	l, err := store.PrepareReading(ctx, l, now)
	if err != nil {
		return store.Lock{}, nil, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Lock{}, nil, err
	}
	defer cancel()
	batch := &pgx.Batch{}
	batch.Queue(acquireSQL, b(l.Key), b(l.Owner), us(l.Deadline), store.EncodeLock(l), us(now))
	batch.Queue(`SELECT rec FROM instances WHERE broker = $1 AND instance_id = $2`, b(l.Broker), b(l.InstanceID))
	var replaced, rec []byte
	var took bool
	err = s.db.Batch(cctx, batch, func(br pgx.BatchResults) error {
		replaced, rec = nil, nil
		err := br.QueryRow().Scan(&replaced)
		if took = err == nil; err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err := br.QueryRow().Scan(&rec); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return nil
	})
	if err != nil {
		return store.Lock{}, nil, s.fail(ctx, "acquire and read the instance", err)
	}
	if !took {
		holder, found, err := s.getLock(cctx, ctx, l.Key, now, false)
		switch {
		case err != nil:
			return store.Lock{}, nil, err
		case found && holder.Owner != l.Owner:
			return holder, nil, store.HeldError(holder)
		}
		return store.AcquireThenRead(ctx, s, l)
	}
	if replaced != nil {
		if old, err := store.DecodeLock(replaced); err == nil {
			l.Replaced = &old // expired: taken over
		}
	}
	if rec == nil {
		return l, nil, nil
	}
	in, err := store.DecodeInstance(l.Broker, l.InstanceID, rec)
	if err != nil {
		return l, nil, err
	}
	return l, &in, nil
}

// getLock reads the lock key: live ones only unless expired is set.
func (s *pgStore) getLock(cctx, ctx context.Context, key string, now time.Time, expired bool) (store.Lock, bool, error) {
	var rec []byte
	err := s.db.QueryRow(cctx, `SELECT rec FROM locks WHERE key = $1 AND ($2 OR deadline_us > $3)`,
		b(key), expired, us(now)).Scan(&rec)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Lock{}, false, nil
	case err != nil:
		return store.Lock{}, false, s.fail(ctx, "read lock", err)
	}
	l, err := decodeLock(key, rec)
	return l, err == nil, err
}

func decodeLock(key string, rec []byte) (store.Lock, error) {
	l, err := store.DecodeLock(rec)
	if err != nil {
		return store.Lock{}, fmt.Errorf("%w: lock %s: %w", store.ErrUnavailable, key, err)
	}
	return l, nil
}

// notOwned explains why a change of the live lock key by owner changed
// nothing: no live lock, or another owner's.
func (s *pgStore) notOwned(cctx, ctx context.Context, key, owner string, now time.Time) error {
	var cur []byte
	err := s.db.QueryRow(cctx, `SELECT owner FROM locks WHERE key = $1 AND deadline_us > $2`, b(key), us(now)).Scan(&cur)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.NoLock(key)
	case err != nil:
		return s.fail(ctx, "read lock", err)
	case !bytes.Equal(cur, []byte(owner)):
		return fmt.Errorf("%w: lock %s", store.ErrNotOwner, key)
	}
	// The owner holds it now: it was re-acquired between the two
	// statements. Nothing was changed; say so as for a lock not found.
	return store.NoLock(key)
}

func (s *pgStore) Update(ctx context.Context, l store.Lock) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.now()
	l, err := store.PrepareLock(l, now)
	if err != nil {
		return err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	tag, err := s.db.Exec(cctx, `UPDATE locks SET deadline_us = $3, rec = $4, replaced = NULL
WHERE key = $1 AND owner = $2 AND deadline_us > $5`, b(l.Key), b(l.Owner), us(l.Deadline), store.EncodeLock(l), us(now))
	switch {
	case err != nil:
		return s.fail(ctx, "update lock", err)
	case tag.RowsAffected() == 0:
		return s.notOwned(cctx, ctx, l.Key, l.Owner, now)
	}
	return nil
}

func (s *pgStore) Release(ctx context.Context, key, owner string) error {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	now := s.now()
	tag, err := s.db.Exec(cctx, `DELETE FROM locks WHERE key = $1 AND owner = $2 AND deadline_us > $3`, b(key), b(owner), us(now))
	switch {
	case err != nil:
		return s.fail(ctx, "release lock", err)
	case tag.RowsAffected() == 0:
		return s.notOwned(cctx, ctx, key, owner, now)
	}
	return nil
}

func (s *pgStore) ForceRelease(ctx context.Context, key string) (store.Lock, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Lock{}, err
	}
	defer cancel()
	var rec []byte
	err = s.db.QueryRow(cctx, `DELETE FROM locks WHERE key = $1 AND deadline_us > $2 RETURNING rec`, b(key), us(s.now())).Scan(&rec)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Lock{}, store.NoLock(key)
	case err != nil:
		return store.Lock{}, s.fail(ctx, "force release lock", err)
	}
	return decodeLock(key, rec)
}

func (s *pgStore) Get(ctx context.Context, key string) (store.Lock, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Lock{}, err
	}
	defer cancel()
	l, found, err := s.getLock(cctx, ctx, key, s.now(), false)
	switch {
	case err != nil:
		return store.Lock{}, err
	case !found:
		return store.Lock{}, store.ErrNotFound // unwrapped, as memory's: Get runs on every poll, and a miss is the common case
	}
	return l, nil
}

// List reads the locks table: with f.InstanceID only the instance's key
// and the keys under "<key>/" (a range of the primary key), else every
// lock; the other filters apply to the decoded locks.
func (s *pgStore) List(ctx context.Context, f store.ListFilter) ([]store.Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := f.Check(); err != nil {
		return nil, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	now := s.now()
	var rows pgx.Rows
	if f.InstanceID != "" {
		k := store.LockKey(f.Broker, f.InstanceID)
		rows, err = s.db.Query(cctx, `SELECT key, rec FROM locks WHERE ($2 OR deadline_us > $3)
	AND (key = $1 OR (key > $4 AND key < $5)) ORDER BY key`, b(k), f.Expired, us(now), b(k+"/"), b(k+"0"))
	} else {
		rows, err = s.db.Query(cctx, `SELECT key, rec FROM locks WHERE $1 OR deadline_us > $2 ORDER BY key`, f.Expired, us(now))
	}
	if err != nil {
		return nil, s.fail(ctx, "list locks", err)
	}
	var out []store.Lock
	for rows.Next() {
		var key, rec []byte
		if err := rows.Scan(&key, &rec); err != nil {
			rows.Close()
			return nil, s.fail(ctx, "list locks", err)
		}
		if l, err := store.DecodeLock(rec); err == nil && f.Matches(l) {
			out = append(out, l)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "list locks", err)
	}
	return out, nil
}

// ExpireDue is one DELETE … RETURNING of the locks whose deadline passed:
// a lock re-acquired meanwhile has a later deadline and stays.
func (s *pgStore) ExpireDue(ctx context.Context, now time.Time) ([]store.Lock, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	out, err := collect(s, ctx, cctx, "expire locks", func(r pgx.CollectableRow) (store.Lock, error) {
		var rec []byte
		if err := r.Scan(&rec); err != nil {
			return store.Lock{}, err
		}
		l, _ := store.DecodeLock(rec) // one that does not decode is gone; it has no key to report
		return l, nil
	}, `DELETE FROM locks WHERE deadline_us <= $1 RETURNING rec`, us(now))
	if err != nil {
		return nil, err
	}
	out = slices.DeleteFunc(out, func(l store.Lock) bool { return l.Key == "" })
	slices.SortFunc(out, store.ByDeadline)
	return out, nil
}
