package postgres

// Export and import of the inventory: pages in key order out, one
// transaction of pipelined INSERTs in.

import (
	"context"
	"iter"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// bindingsAfter reads a page of bindings in (broker, instance, binding)
// order after pos, for Export.
func (s *pgStore) bindingsAfter(ctx context.Context, pos store.BindingPos, limit int) ([]store.Binding, store.BindingPos, bool, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, pos, false, err
	}
	defer cancel()
	out, err := collect(s, ctx, cctx, "export bindings", scanBinding, `SELECT broker, instance_id, binding_id, rec FROM bindings
WHERE (broker, instance_id, binding_id) > ($1, $2, $3) ORDER BY broker, instance_id, binding_id LIMIT $4`,
		b(pos.Broker), b(pos.Instance), b(pos.Binding), limit)
	if err != nil {
		return nil, pos, false, err
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
