package postgres

import (
	"context"
	"iter"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The usage records of the postgres backend (internal/store's usage.go
// says what they are): a row each, written in the transaction of the
// inventory change that ends the interval, indexed by Deleted (and by
// broker and Deleted).

// addUsage inserts rs in tx.
func addUsage(ctx context.Context, tx pgx.Tx, rs ...store.UsageRecord) error {
	for _, r := range rs {
		if _, err := tx.Exec(ctx, `INSERT INTO usage_records (deleted_us, broker, rec) VALUES ($1, $2, $3)`,
			us(r.Deleted), b(r.Broker), store.EncodeUsage(r)); err != nil {
			return err
		}
	}
	return nil
}

// UsageRecords reads a page of store.UsagePage records at a time, in
// (Deleted, id) order from after on.
func (s *pgStore) UsageRecords(ctx context.Context, broker string, after time.Time) iter.Seq2[store.UsageRecord, error] {
	return func(yield func(store.UsageRecord, error) bool) {
		deleted, id := us(after), int64(math.MaxInt64)
		for {
			page, err := s.usagePage(ctx, broker, deleted, id)
			if err != nil {
				yield(store.UsageRecord{}, err)
				return
			}
			for _, p := range page {
				if !yield(p.r, nil) {
					return
				}
				deleted, id = p.deleted, p.id
			}
			if len(page) < store.UsagePage {
				return
			}
		}
	}
}

type usageRow struct {
	id, deleted int64
	r           store.UsageRecord
}

func (s *pgStore) usagePage(ctx context.Context, broker string, deleted, id int64) ([]usageRow, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	q := query{sql: `SELECT id, deleted_us, rec FROM usage_records WHERE (deleted_us, id) > ($1, $2)`, args: []any{deleted, id}}
	q.and("broker", broker)
	q.add(` ORDER BY deleted_us, id LIMIT `, store.UsagePage)
	return collect(s, ctx, cctx, "read usage", func(r pgx.CollectableRow) (usageRow, error) {
		var u usageRow
		var rec []byte
		if err := r.Scan(&u.id, &u.deleted, &rec); err != nil {
			return u, err
		}
		var err error
		u.r, err = store.DecodeUsage(rec, u.deleted)
		return u, err
	}, q.sql, q.args...)
}

// PurgeUsage deletes store.UsagePage records per statement.
func (s *pgStore) PurgeUsage(ctx context.Context, before time.Time) (int, error) {
	n := 0
	for {
		cctx, cancel, err := s.begin(ctx)
		if err != nil {
			return n, err
		}
		tag, err := s.db.Exec(cctx, `DELETE FROM usage_records WHERE id IN
	(SELECT id FROM usage_records WHERE deleted_us < $1 ORDER BY deleted_us LIMIT $2)`, us(before), store.UsagePage)
		cancel()
		if err != nil {
			return n, s.fail(ctx, "purge usage", err)
		}
		n += int(tag.RowsAffected())
		if tag.RowsAffected() < store.UsagePage {
			return n, nil
		}
	}
}
