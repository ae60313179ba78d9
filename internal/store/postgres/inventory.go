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
// on. A put is one INSERT … ON CONFLICT; a put that replaces a record
// (of an instance, or of a binding keeping its Created) replaces it only
// if it is still the one it read (see PutInstance); a delete is one
// transaction deleting the records and writing their usage records.

// insertInstanceSQL inserts the instance if it has no row, else reads the
// row's record, and deletes the orphan $5 (NULL: none): whether it
// inserted, the record it found (NULL when it inserted), and whether it
// deleted an orphan. The record's SELECT sees the statement's snapshot: a
// row inserted by another transaction since comes back as neither
// inserted nor found.
const insertInstanceSQL = `WITH gone AS (DELETE FROM orphans WHERE id = $5 RETURNING true),
put AS (
	INSERT INTO instances (broker, instance_id, tenant, rec) VALUES ($1, $2, $3, $4)
	ON CONFLICT (broker, instance_id) DO NOTHING RETURNING true)
SELECT EXISTS (SELECT FROM put),
	(SELECT rec FROM instances WHERE broker = $1 AND instance_id = $2 AND NOT EXISTS (SELECT FROM put)),
	EXISTS (SELECT FROM gone)`

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

// insertBindingSQL is insertInstanceSQL for a binding, without an orphan.
const insertBindingSQL = `WITH put AS (
	INSERT INTO bindings (broker, instance_id, binding_id, expires_us, rec) VALUES ($1, $2, $3, $4, $5)
	ON CONFLICT (broker, instance_id, binding_id) DO NOTHING RETURNING true)
SELECT EXISTS (SELECT FROM put),
	(SELECT rec FROM bindings WHERE broker = $1 AND instance_id = $2 AND binding_id = $3 AND NOT EXISTS (SELECT FROM put))`

// replaceBindingSQL is replaceInstanceSQL for a binding.
const replaceBindingSQL = `UPDATE bindings SET expires_us = $4, rec = $5
WHERE broker = $1 AND instance_id = $2 AND binding_id = $3 AND rec = $6`

// expires is the expires_us of a binding: NULL when it has no ExpiresAt.
func expires(bd store.Binding) any {
	if bd.ExpiresAt.IsZero() {
		return nil
	}
	return us(bd.ExpiresAt)
}

func (s *pgStore) PutInstance(ctx context.Context, in store.Instance) (store.Instance, error) {
	in, _, err := s.PutInstanceCancelling(ctx, in, "")
	return in, err
}

// PutInstanceCancelling is one statement for an instance without a row:
// the INSERT, and the orphan's DELETE beside it. A row there comes back
// instead, and a second statement replaces that record (with its Created,
// when in has none) only if the row still holds it, writing the usage
// record of a plan change in the same statement. Only when the record
// changed between the two does it take the row's lock, in a transaction
// (putInstanceLocked). Either way the put and its usage record are one
// atomic step, and the usage record and the Created kept are the ones of
// the record replaced.
func (s *pgStore) PutInstanceCancelling(ctx context.Context, in store.Instance, orphanID string) (store.Instance, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Instance{}, false, err
	}
	keep := in.Created.IsZero()
	in, rec, err := store.PrepareInstance(in, s.now())
	if err != nil {
		return store.Instance{}, false, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Instance{}, false, err
	}
	defer cancel()
	stored, done, cancelled, err := s.putInstance(cctx, in, rec, keep, orphanID)
	if err == nil && !done {
		stored, err = s.putInstanceLocked(cctx, in, rec, keep)
	}
	if err != nil {
		return store.Instance{}, false, s.fail(ctx, "put instance", err)
	}
	return stored, cancelled, nil
}

// putInstance inserts the instance, or replaces the record it finds if
// nothing else replaced it meanwhile (keep: with that record's Created),
// and deletes the orphan orphanID; done false: something replaced it.
func (s *pgStore) putInstance(ctx context.Context, in store.Instance, rec []byte, keep bool, orphanID string) (
	stored store.Instance, done, cancelled bool, err error) {
	var orphan any // NULL: no orphan
	if orphanID != "" {
		orphan = b(orphanID)
	}
	var inserted bool
	var old []byte
	err = s.db.QueryRow(ctx, insertInstanceSQL, b(in.Broker), b(in.InstanceID), b(in.Tenant), rec, orphan).Scan(&inserted, &old, &cancelled)
	switch {
	case err != nil:
		return store.Instance{}, false, false, err
	case inserted:
		return in, true, cancelled, nil
	case old == nil: // inserted by another transaction since the statement began
		return store.Instance{}, false, cancelled, nil
	}
	if keep {
		if in, rec, err = store.KeepInstanceCreated(in, rec, old); err != nil {
			return store.Instance{}, false, cancelled, err
		}
	}
	r, replan, err := store.ReplanUsage(old, in, s.now())
	if err != nil {
		return store.Instance{}, false, cancelled, err
	}
	key := []any{b(in.Broker), b(in.InstanceID), b(in.Tenant), rec, old}
	var tag pgconn.CommandTag
	if replan {
		tag, err = s.db.Exec(ctx, replanInstanceSQL, append(key, us(r.Deleted), b(r.Broker), store.EncodeUsage(r))...)
	} else {
		tag, err = s.db.Exec(ctx, replaceInstanceSQL, key...)
	}
	return in, tag.RowsAffected() == 1, cancelled, err
}

// putInstanceLocked puts the instance in a transaction that first locks
// the row it replaces (and reads its record, for the usage record of a
// plan change, and with keep its Created).
func (s *pgStore) putInstanceLocked(ctx context.Context, in store.Instance, rec []byte, keep bool) (store.Instance, error) {
	var stored store.Instance
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var old []byte
		err := tx.QueryRow(ctx, `SELECT rec FROM instances WHERE broker = $1 AND instance_id = $2 FOR UPDATE`,
			b(in.Broker), b(in.InstanceID)).Scan(&old)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		put, putRec := in, rec
		if keep {
			if put, putRec, err = store.KeepInstanceCreated(in, rec, old); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, putInstanceSQL, b(put.Broker), b(put.InstanceID), b(put.Tenant), putRec); err != nil {
			return err
		}
		stored = put
		r, replan, err := store.ReplanUsage(old, put, s.now())
		if err != nil || !replan {
			return err
		}
		return addUsage(ctx, tx, r)
	})
	return stored, err
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
	keep := bd.Created.IsZero()
	bd, rec, err := store.PrepareBinding(bd, s.now())
	if err != nil {
		return store.Binding{}, err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Binding{}, err
	}
	defer cancel()
	if keep {
		bd, err = s.putBindingKeeping(cctx, bd, rec)
	} else {
		_, err = s.db.Exec(cctx, putBindingSQL, b(bd.Broker), b(bd.InstanceID), b(bd.BindingID), expires(bd), rec)
	}
	if err != nil {
		return store.Binding{}, s.fail(ctx, "put binding", err)
	}
	return bd, nil
}

// putBindingKeeping puts a binding that keeps the Created of the record
// it replaces, as PutInstance does: one statement for a new binding, a
// second replacing the record it found if the row still holds it, else a
// transaction holding the row's lock.
func (s *pgStore) putBindingKeeping(ctx context.Context, bd store.Binding, rec []byte) (store.Binding, error) {
	key := []any{b(bd.Broker), b(bd.InstanceID), b(bd.BindingID)}
	var inserted bool
	var old []byte
	if err := s.db.QueryRow(ctx, insertBindingSQL, append(key, expires(bd), rec)...).Scan(&inserted, &old); err != nil || inserted {
		return bd, err
	}
	if old != nil {
		put, putRec, err := store.KeepBindingCreated(bd, rec, old)
		if err != nil {
			return store.Binding{}, err
		}
		tag, err := s.db.Exec(ctx, replaceBindingSQL, append(key, expires(put), putRec, old)...)
		if err != nil || tag.RowsAffected() == 1 {
			return put, err
		}
	}
	var stored store.Binding
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var old []byte
		err := tx.QueryRow(ctx, `SELECT rec FROM bindings WHERE broker = $1 AND instance_id = $2 AND binding_id = $3 FOR UPDATE`,
			key...).Scan(&old)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		put, putRec, err := store.KeepBindingCreated(bd, rec, old)
		if err != nil {
			return err
		}
		stored = put
		_, err = tx.Exec(ctx, putBindingSQL, append(key, expires(put), putRec)...)
		return err
	})
	return stored, err
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
