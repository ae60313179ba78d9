package postgres

// Bindings by expiry: the partial index of bindings with an ExpiresAt.

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// ExpiringBindings reads the partial index of bindings with an ExpiresAt
// (by ExpiresAt alone, a fifth of an index holding the keys too): its cost
// grows with the bindings it passes (other brokers' too, when broker is
// set), never with those without one.
func (s *pgStore) ExpiringBindings(ctx context.Context, broker string, before time.Time, limit int) ([]store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit, err := store.ExpiringArgs(broker, limit)
	if err != nil {
		return nil, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	q := query{sql: `SELECT broker, instance_id, binding_id, rec FROM bindings WHERE expires_us IS NOT NULL AND expires_us < $1`,
		args: []any{us(before)}}
	q.and("broker", broker)
	q.add(` ORDER BY expires_us, broker, instance_id, binding_id LIMIT `, limit)
	return collect(s, ctx, cctx, "expiring bindings", scanBinding, q.sql, q.args...)
}

func (s *pgStore) CountExpiring(ctx context.Context, before time.Time) (map[string]int, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.db.Query(cctx, `SELECT broker, count(*) FROM bindings
WHERE expires_us IS NOT NULL AND expires_us < $1 GROUP BY broker`, us(before))
	if err != nil {
		return nil, s.fail(ctx, "count expiring", err)
	}
	counts := map[string]int{}
	var broker []byte
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&broker, &n}, func() error {
		counts[string(broker)] = int(n)
		return nil
	})
	if err != nil {
		return nil, s.fail(ctx, "count expiring", err)
	}
	return counts, nil
}
