package postgres

import (
	"bytes"
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The inventory of the postgres backend: a row per instance and per
// binding, the packed record beside the columns listings filter and sort
// on. A put is one INSERT … ON CONFLICT; an instance's put replaces a
// record only if it is still the one it read (see PutInstance); a delete
// is one transaction deleting the records and writing their usage records.

// insertInstanceSQL inserts the instance if it has no row, else reads the
// row's record. The SELECT sees the statement's snapshot: a row inserted
// by another transaction since comes back as neither.
const insertInstanceSQL = `WITH put AS (
	INSERT INTO instances (broker, instance_id, tenant, rec) VALUES ($1, $2, $3, $4)
	ON CONFLICT (broker, instance_id) DO NOTHING RETURNING true)
SELECT true, NULL::bytea FROM put
UNION ALL
SELECT false, rec FROM instances WHERE broker = $1 AND instance_id = $2 AND NOT EXISTS (SELECT FROM put)`

// replaceInstanceSQL replaces the record $5 with $4: nothing when the row
// holds another by now.
const replaceInstanceSQL = `UPDATE instances SET tenant = $3, rec = $4 WHERE broker = $1 AND instance_id = $2 AND rec = $5`

// replanInstanceSQL is replaceInstanceSQL writing the usage record of the
// plan it ends ($6, $7, $8 as addUsage's) in the same statement, only if
// it replaced the record.
const replanInstanceSQL = `WITH put AS (
	UPDATE instances SET tenant = $3, rec = $4 WHERE broker = $1 AND instance_id = $2 AND rec = $5 RETURNING true)
INSERT INTO usage_records (deleted_us, broker, rec) SELECT $6, $7, $8 FROM put`

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

// PutInstance is one statement for an instance without a row: the
// INSERT. A row there comes back instead, and a second statement replaces
// that record only if the row still holds it, writing the usage record of
// a plan change in the same statement. Only when the record changed
// between the two does it take the row's lock, in a transaction
// (putInstanceLocked). Either way the put and its usage record are one
// atomic step, and the usage record is the one of the record replaced.
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
	done, err := s.putInstance(cctx, in, rec)
	if err == nil && !done {
		err = s.putInstanceLocked(cctx, in, rec)
	}
	if err != nil {
		return store.Instance{}, s.fail(ctx, "put instance", err)
	}
	return in, nil
}

// putInstance inserts the instance, or replaces the record it finds if
// nothing else replaced it meanwhile; false: something did.
func (s *pgStore) putInstance(ctx context.Context, in store.Instance, rec []byte) (bool, error) {
	key := []any{b(in.Broker), b(in.InstanceID), b(in.Tenant), rec}
	var inserted bool
	var old []byte
	err := s.db.QueryRow(ctx, insertInstanceSQL, key...).Scan(&inserted, &old)
	switch {
	case errors.Is(err, pgx.ErrNoRows): // inserted by another transaction since the statement began
		return false, nil
	case err != nil || inserted:
		return inserted, err
	}
	r, replan, err := store.ReplanUsage(old, in, s.now())
	if err != nil {
		return false, err
	}
	var tag pgconn.CommandTag
	if replan {
		tag, err = s.db.Exec(ctx, replanInstanceSQL, append(key, old, us(r.Deleted), b(r.Broker), store.EncodeUsage(r))...)
	} else {
		tag, err = s.db.Exec(ctx, replaceInstanceSQL, append(key, old)...)
	}
	return tag.RowsAffected() == 1, err
}

// putInstanceLocked puts the instance in a transaction that first locks
// the row it replaces (and reads its record, for the usage record of a
// plan change).
func (s *pgStore) putInstanceLocked(ctx context.Context, in store.Instance, rec []byte) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var old []byte
		err := tx.QueryRow(ctx, `SELECT rec FROM instances WHERE broker = $1 AND instance_id = $2 FOR UPDATE`,
			b(in.Broker), b(in.InstanceID)).Scan(&old)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, putInstanceSQL, b(in.Broker), b(in.InstanceID), b(in.Tenant), rec); err != nil {
			return err
		}
		r, replan, err := store.ReplanUsage(old, in, s.now())
		if err != nil || !replan {
			return err
		}
		return addUsage(ctx, tx, r)
	})
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
