package postgres

// Listings and counts of the inventory: pages of instances in key order,
// an instance's bindings, and the counters the triggers keep.

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// scanBinding reads a row of (broker, instance_id, binding_id, rec).
func scanBinding(r pgx.CollectableRow) (store.Binding, error) {
	var broker, instance, binding, rec []byte
	if err := r.Scan(&broker, &instance, &binding, &rec); err != nil {
		return store.Binding{}, err
	}
	return store.DecodeBinding(string(broker), string(instance), string(binding), rec)
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
	return collect(s, ctx, cctx, "list bindings", scanBinding, `SELECT broker, instance_id, binding_id, rec FROM bindings
WHERE broker = $1 AND instance_id = $2 ORDER BY binding_id`, b(broker), b(instanceID))
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
	found, err := collect(s, ctx, cctx, "list instances", func(r pgx.CollectableRow) (store.Instance, error) {
		var broker, id, rec []byte
		if err := r.Scan(&broker, &id, &rec); err != nil {
			return store.Instance{}, err
		}
		return store.DecodeInstance(string(broker), string(id), rec)
	}, q.sql, q.args...)
	if err != nil {
		return nil, "", err
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
