package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The orphan queue of the postgres backend: one row per orphan, its
// record without the claim, and the claim in columns of its own
// (claimed_by '' : none), so that ClaimOrphan is one UPDATE whose WHERE
// is the claim rule, and DueOrphans one indexed SELECT.

// orphanCols are what every read of an orphan selects.
const orphanCols = `rec, claimed_by, claimed_until_us`

func (s *pgStore) PutOrphan(ctx context.Context, o store.Orphan) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o, err := store.PrepareOrphan(o, s.now())
	if err != nil {
		return err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var until int64
	if o.ClaimedBy != "" {
		until = us(o.ClaimedUntil)
	}
	rec := unclaimed(o)
	_, err = s.db.Exec(cctx, `INSERT INTO orphans (id, next_us, claimed_by, claimed_until_us, rec) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO UPDATE SET next_us = excluded.next_us, claimed_by = excluded.claimed_by,
	claimed_until_us = excluded.claimed_until_us, rec = excluded.rec`,
		b(o.ID), us(o.NextAttempt), b(o.ClaimedBy), until, rec)
	return s.fail(ctx, "put orphan", err)
}

// unclaimed is the record of o without its claim.
func unclaimed(o store.Orphan) []byte {
	o.ClaimedBy, o.ClaimedUntil = "", time.Time{}
	return store.EncodeOrphan(o)
}

// scanOrphan reads the orphanCols of a row.
func scanOrphan(row pgx.Row) (store.Orphan, error) {
	var rec, by []byte
	var until int64
	if err := row.Scan(&rec, &by, &until); err != nil {
		return store.Orphan{}, err
	}
	o, err := store.DecodeOrphan(rec)
	if err != nil {
		return store.Orphan{}, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	if len(by) > 0 {
		o.ClaimedBy, o.ClaimedUntil = string(by), time.UnixMicro(until).UTC()
	}
	return o, nil
}

func (s *pgStore) GetOrphan(ctx context.Context, id string) (store.Orphan, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Orphan{}, err
	}
	defer cancel()
	o, err := scanOrphan(s.db.QueryRow(cctx, `SELECT `+orphanCols+` FROM orphans WHERE id = $1`, b(id)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Orphan{}, store.NoOrphan(id)
	case err != nil:
		return store.Orphan{}, s.fail(ctx, "get orphan "+id, err)
	}
	return o, nil
}

// ListOrphans reads the whole queue: what brokers failed to clean up,
// hundreds rather than millions.
func (s *pgStore) ListOrphans(ctx context.Context) ([]store.Orphan, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	return s.orphans(ctx, cctx, `SELECT `+orphanCols+` FROM orphans ORDER BY id`)
}

// orphans runs a query of orphanCols.
func (s *pgStore) orphans(ctx, cctx context.Context, sql string, args ...any) ([]store.Orphan, error) {
	return collect(s, ctx, cctx, "read orphans", func(r pgx.CollectableRow) (store.Orphan, error) { return scanOrphan(r) }, sql, args...)
}

func (s *pgStore) DeleteOrphan(ctx context.Context, id string) error {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	tag, err := s.db.Exec(cctx, `DELETE FROM orphans WHERE id = $1`, b(id))
	switch {
	case err != nil:
		return s.fail(ctx, "delete orphan", err)
	case tag.RowsAffected() == 0:
		return store.NoOrphan(id)
	}
	return nil
}

func (s *pgStore) DueOrphans(ctx context.Context, now time.Time, limit int) ([]store.Orphan, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var lim any // NULL: LIMIT ALL
	if limit > 0 {
		lim = int64(limit)
	}
	return s.orphans(ctx, cctx, `SELECT `+orphanCols+` FROM orphans
WHERE next_us <= $1 AND NOT (claimed_by <> '' AND claimed_until_us > $1)
ORDER BY next_us, id LIMIT $2`, us(now), lim)
}

// claimTries bounds ClaimOrphan's rounds when the claim it found lapsed or
// went before it could read it.
const claimTries = 3

// ClaimOrphan is one UPDATE when the claim is taken: its WHERE is the
// claim rule at the store's now. Only a refused claim reads the orphan.
func (s *pgStore) ClaimOrphan(ctx context.Context, id, claimant string, until time.Time) (store.Orphan, error) {
	if err := ctx.Err(); err != nil {
		return store.Orphan{}, err
	}
	now := s.now()
	until, err := store.PrepareClaim(id, claimant, until, now)
	if err != nil {
		return store.Orphan{}, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Orphan{}, err
	}
	defer cancel()
	for range claimTries {
		o, err := scanOrphan(s.db.QueryRow(cctx, `UPDATE orphans SET claimed_by = $2, claimed_until_us = $3
WHERE id = $1 AND (claimed_by = '' OR claimed_by = $2 OR claimed_until_us <= $4)
RETURNING `+orphanCols, b(id), b(claimant), us(until), us(now)))
		switch {
		case err == nil:
			return o, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return store.Orphan{}, s.fail(ctx, "claim orphan "+id, err)
		}
		o, err = scanOrphan(s.db.QueryRow(cctx, `SELECT `+orphanCols+` FROM orphans WHERE id = $1`, b(id)))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return store.Orphan{}, store.NoOrphan(id)
		case err != nil:
			return store.Orphan{}, s.fail(ctx, "claim orphan "+id, err)
		case store.ClaimLive(o, now) && o.ClaimedBy != claimant:
			return o, store.OrphanHeld(o)
		}
	}
	return store.Orphan{}, fmt.Errorf("%w: orphan %s: its claim changed %d times while claiming", store.ErrUnavailable, id, claimTries)
}
