package postgres

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The inventory of the postgres backend: a row per instance and per
// binding, the packed record beside the columns listings filter and sort
// on. A put is one INSERT … ON CONFLICT (an instance's in a short
// transaction that first reads the record it replaces, for the usage
// record of a plan change); a delete is one transaction deleting the
// records and writing their usage records.

const putInstanceSQL = `INSERT INTO instances (broker, instance_id, tenant, rec) VALUES ($1, $2, $3, $4)
ON CONFLICT (broker, instance_id) DO UPDATE SET tenant = excluded.tenant, rec = excluded.rec`

const putBindingSQL = `INSERT INTO bindings (broker, instance_id, binding_id, expires_us, rec) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (broker, instance_id, binding_id) DO UPDATE SET expires_us = excluded.expires_us, rec = excluded.rec`

// expires is the expires_us of a binding: NULL when it has no ExpiresAt.
func expires(bd store.Binding) any {
	if bd.ExpiresAt.IsZero() {
		return nil
	}
	return us(bd.ExpiresAt)
}

func (s *pgStore) PutInstance(ctx context.Context, in store.Instance) (store.Instance, error) {
	if err := ctx.Err(); err != nil {
		return store.Instance{}, err
	}
	in, rec, err := store.PrepareInstance(in, s.now())
	if err != nil {
		return store.Instance{}, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Instance{}, err
	}
	defer cancel()
	err = s.inTx(cctx, func(tx pgx.Tx) error {
		var old []byte
		err := tx.QueryRow(cctx, `SELECT rec FROM instances WHERE broker = $1 AND instance_id = $2 FOR UPDATE`,
			b(in.Broker), b(in.InstanceID)).Scan(&old)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(cctx, putInstanceSQL, b(in.Broker), b(in.InstanceID), b(in.Tenant), rec); err != nil {
			return err
		}
		r, replan, err := store.ReplanUsage(old, in, s.now())
		if err != nil || !replan {
			return err
		}
		return addUsage(cctx, tx, r)
	})
	if err != nil {
		return store.Instance{}, s.fail(ctx, "put instance", err)
	}
	return in, nil
}

func (s *pgStore) GetInstance(ctx context.Context, broker, instanceID string) (store.Instance, error) {
	if err := ctx.Err(); err != nil {
		return store.Instance{}, err
	}
	if err := store.CheckInstanceKey(broker, instanceID); err != nil {
		return store.Instance{}, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Instance{}, err
	}
	defer cancel()
	var rec []byte
	err = s.db.QueryRow(cctx, `SELECT rec FROM instances WHERE broker = $1 AND instance_id = $2`, b(broker), b(instanceID)).Scan(&rec)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Instance{}, store.NoInstance(broker, instanceID)
	case err != nil:
		return store.Instance{}, s.fail(ctx, "get instance", err)
	}
	return store.DecodeInstance(broker, instanceID, rec)
}

// errNothing rolls back a delete that found nothing.
var errNothing = errors.New("nothing to delete")

func (s *pgStore) DeleteInstance(ctx context.Context, broker, instanceID string) ([]store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckInstanceKey(broker, instanceID); err != nil {
		return nil, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var gone []store.Binding
	err = s.inTx(cctx, func(tx pgx.Tx) error {
		var rec []byte
		err := tx.QueryRow(cctx, `DELETE FROM instances WHERE broker = $1 AND instance_id = $2 RETURNING rec`,
			b(broker), b(instanceID)).Scan(&rec)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		rows, err := tx.Query(cctx, `DELETE FROM bindings WHERE broker = $1 AND instance_id = $2 RETURNING binding_id, rec`,
			b(broker), b(instanceID))
		if err != nil {
			return err
		}
		type row struct{ id, rec []byte }
		recs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
			var x row
			err := r.Scan(&x.id, &x.rec)
			return x, err
		})
		if err != nil {
			return err
		}
		if rec == nil && len(recs) == 0 {
			return errNothing
		}
		slices.SortFunc(recs, func(a, b row) int { return bytes.Compare(a.id, b.id) })
		gone = gone[:0]
		for _, r := range recs {
			bd, err := store.DecodeBinding(broker, instanceID, string(r.id), r.rec)
			if err != nil { // a record that does not decode: delete nothing
				return err
			}
			gone = append(gone, bd)
		}
		used, err := store.DeletedUsage(broker, instanceID, rec, gone, s.now())
		if err != nil {
			return err
		}
		return addUsage(cctx, tx, used...)
	})
	switch {
	case errors.Is(err, errNothing):
		return nil, store.NoInstance(broker, instanceID)
	case err != nil:
		return nil, s.fail(ctx, "delete instance", err)
	}
	return gone, nil
}

func (s *pgStore) PutBinding(ctx context.Context, bd store.Binding) (store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return store.Binding{}, err
	}
	bd, rec, err := store.PrepareBinding(bd, s.now())
	if err != nil {
		return store.Binding{}, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Binding{}, err
	}
	defer cancel()
	_, err = s.db.Exec(cctx, putBindingSQL, b(bd.Broker), b(bd.InstanceID), b(bd.BindingID), expires(bd), rec)
	if err != nil {
		return store.Binding{}, s.fail(ctx, "put binding", err)
	}
	return bd, nil
}

func (s *pgStore) GetBinding(ctx context.Context, broker, instanceID, bindingID string) (store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return store.Binding{}, err
	}
	if err := store.CheckBindingKey(broker, instanceID, bindingID); err != nil {
		return store.Binding{}, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Binding{}, err
	}
	defer cancel()
	var rec []byte
	err = s.db.QueryRow(cctx, `SELECT rec FROM bindings WHERE broker = $1 AND instance_id = $2 AND binding_id = $3`,
		b(broker), b(instanceID), b(bindingID)).Scan(&rec)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.Binding{}, store.NoBinding(broker, instanceID, bindingID)
	case err != nil:
		return store.Binding{}, s.fail(ctx, "get binding", err)
	}
	return store.DecodeBinding(broker, instanceID, bindingID, rec)
}

func (s *pgStore) DeleteBinding(ctx context.Context, broker, instanceID, bindingID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckBindingKey(broker, instanceID, bindingID); err != nil {
		return err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	err = s.inTx(cctx, func(tx pgx.Tx) error {
		var rec []byte
		err := tx.QueryRow(cctx, `DELETE FROM bindings WHERE broker = $1 AND instance_id = $2 AND binding_id = $3 RETURNING rec`,
			b(broker), b(instanceID), b(bindingID)).Scan(&rec)
		if errors.Is(err, pgx.ErrNoRows) {
			return errNothing
		}
		if err != nil {
			return err
		}
		gone, err := store.DecodeBinding(broker, instanceID, bindingID, rec)
		if err != nil {
			return err
		}
		return addUsage(cctx, tx, store.BindingUsage(gone, s.now()))
	})
	switch {
	case errors.Is(err, errNothing):
		return store.NoBinding(broker, instanceID, bindingID)
	case err != nil:
		return s.fail(ctx, "delete binding", err)
	}
	return nil
}

// bindingRows collects rows of (broker, instance_id, binding_id, rec).
func bindingRows(rows pgx.Rows) ([]store.Binding, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Binding, error) {
		var broker, instance, binding, rec []byte
		if err := r.Scan(&broker, &instance, &binding, &rec); err != nil {
			return store.Binding{}, err
		}
		return store.DecodeBinding(string(broker), string(instance), string(binding), rec)
	})
}

func (s *pgStore) ListBindings(ctx context.Context, broker, instanceID string) ([]store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckInstanceKey(broker, instanceID); err != nil {
		return nil, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.db.Query(cctx, `SELECT broker, instance_id, binding_id, rec FROM bindings
WHERE broker = $1 AND instance_id = $2 ORDER BY binding_id`, b(broker), b(instanceID))
	if err != nil {
		return nil, s.fail(ctx, "list bindings", err)
	}
	out, err := bindingRows(rows)
	if err != nil {
		return nil, s.fail(ctx, "list bindings", err)
	}
	return out, nil
}

func (s *pgStore) ListInstances(ctx context.Context, f store.InstanceFilter, cursor string, limit int) ([]store.Instance, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	cb, ci, limit, err := store.ListArgs(f, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, "", err
	}
	defer cancel()
	q := query{sql: `SELECT broker, instance_id, rec FROM instances WHERE true`}
	if cb != "" { // else the first page: a range from ('', '') would hide the broker's from the planner
		q.add(` AND (broker, instance_id) > (`, b(cb))
		q.add(`, `, b(ci))
		q.sql += `)`
	}
	q.and("broker", f.Broker)
	q.and("tenant", f.Tenant)
	q.add(` ORDER BY broker, instance_id LIMIT `, limit+1)
	rows, err := s.db.Query(cctx, q.sql, q.args...)
	if err != nil {
		return nil, "", s.fail(ctx, "list instances", err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Instance, error) {
		var broker, id, rec []byte
		if err := r.Scan(&broker, &id, &rec); err != nil {
			return store.Instance{}, err
		}
		return store.DecodeInstance(string(broker), string(id), rec)
	})
	if err != nil {
		return nil, "", s.fail(ctx, "list instances", err)
	}
	page, next := store.PageOf(found, limit, store.InstanceName)
	return page, next, nil
}

// CountInstances sums the counters the triggers keep per broker and
// tenant: its cost grows with the brokers and tenants, not the instances.
func (s *pgStore) CountInstances(ctx context.Context, f store.InstanceFilter) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := store.CheckFilter(f); err != nil {
		return 0, err
	}
	return s.count(ctx, "count instances", `SELECT coalesce(sum(n), 0)::bigint FROM instance_counts
WHERE ($1::bytea IS NULL OR broker = $1) AND ($2::bytea IS NULL OR tenant = $2)`, opt(f.Broker), opt(f.Tenant))
}

func (s *pgStore) CountBindings(ctx context.Context, broker string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := store.CheckName("broker", broker, false); err != nil {
		return 0, err
	}
	return s.count(ctx, "count bindings", `SELECT coalesce(sum(n), 0)::bigint FROM binding_counts WHERE $1::bytea IS NULL OR broker = $1`, opt(broker))
}

func (s *pgStore) count(ctx context.Context, op, sql string, args ...any) (int, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	var n int64
	if err := s.db.QueryRow(cctx, sql, args...).Scan(&n); err != nil {
		return 0, s.fail(ctx, op, err)
	}
	return int(n), nil
}

// query builds a statement whose filters are only those set: a filter
// written "$n IS NULL OR column = $n" would keep a cached generic plan
// from using an index.
type query struct {
	sql  string
	args []any
}

// add appends sql and a parameter for v.
func (q *query) add(sql string, v any) {
	q.args = append(q.args, v)
	q.sql += sql + "$" + strconv.Itoa(len(q.args))
}

// and adds "AND column = value" unless value is "" (no filter).
func (q *query) and(column, value string) {
	if value != "" {
		q.add(" AND "+column+" = ", []byte(value))
	}
}

// bindingsAfter reads a page of bindings in (broker, instance, binding)
// order after pos, for Export.
func (s *pgStore) bindingsAfter(ctx context.Context, pos store.BindingPos, limit int) ([]store.Binding, store.BindingPos, bool, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, pos, false, err
	}
	defer cancel()
	rows, err := s.db.Query(cctx, `SELECT broker, instance_id, binding_id, rec FROM bindings
WHERE (broker, instance_id, binding_id) > ($1, $2, $3) ORDER BY broker, instance_id, binding_id LIMIT $4`,
		b(pos.Broker), b(pos.Instance), b(pos.Binding), limit)
	if err != nil {
		return nil, pos, false, s.fail(ctx, "export bindings", err)
	}
	out, err := bindingRows(rows)
	if err != nil {
		return nil, pos, false, s.fail(ctx, "export bindings", err)
	}
	if len(out) < limit {
		return out, pos, true, nil
	}
	last := out[len(out)-1]
	return out, store.BindingPos{Broker: last.Broker, Instance: last.InstanceID, Binding: last.BindingID}, false, nil
}

func (s *pgStore) Export(ctx context.Context) iter.Seq2[store.Entry, error] {
	return store.Export(ctx, s.ListInstances, s.bindingsAfter)
}

// Import writes the batch in one transaction, one pipelined batch of
// INSERTs (ON CONFLICT DO NOTHING unless replace).
func (s *pgStore) Import(ctx context.Context, entries []store.Entry, replace bool) (store.ImportResult, error) {
	if err := ctx.Err(); err != nil {
		return store.ImportResult{}, err
	}
	prepared, err := store.PrepareEntries(entries, s.now())
	if err != nil {
		return store.ImportResult{}, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.ImportResult{}, err
	}
	defer cancel()
	instSQL, bindSQL := putInstanceSQL, putBindingSQL
	if !replace {
		instSQL = `INSERT INTO instances (broker, instance_id, tenant, rec) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`
		bindSQL = `INSERT INTO bindings (broker, instance_id, binding_id, expires_us, rec) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`
	}
	var res store.ImportResult
	err = s.inTx(cctx, func(tx pgx.Tx) error {
		res = store.ImportResult{}
		var batch pgx.Batch
		for _, e := range prepared {
			if in := e.Instance; in != nil {
				batch.Queue(instSQL, b(in.Broker), b(in.InstanceID), b(in.Tenant), e.Rec)
			} else {
				bd := e.Binding
				batch.Queue(bindSQL, b(bd.Broker), b(bd.InstanceID), b(bd.BindingID), expires(*bd), e.Rec)
			}
		}
		br := tx.SendBatch(cctx, &batch)
		for range prepared {
			tag, err := br.Exec()
			if err != nil {
				br.Close()
				return err
			}
			if tag.RowsAffected() > 0 {
				res.Written++
			} else {
				res.Skipped++
			}
		}
		return br.Close()
	})
	if err != nil {
		return store.ImportResult{}, s.fail(ctx, "import", err)
	}
	return res, nil
}

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
	rows, err := s.db.Query(cctx, q.sql, q.args...)
	if err != nil {
		return nil, s.fail(ctx, "expiring bindings", err)
	}
	out, err := bindingRows(rows)
	if err != nil {
		return nil, s.fail(ctx, "expiring bindings", err)
	}
	return out, nil
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
