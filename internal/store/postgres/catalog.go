package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The catalog records of the postgres backend: a row per broker, the
// record's JSON beside its accepted hash, so that PutCatalogs is one
// statement whose WHERE checks the hash.

func (s *pgStore) GetCatalogs(ctx context.Context, broker string) (store.BrokerCatalogs, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.BrokerCatalogs{}, err
	}
	defer cancel()
	var rec []byte
	err = s.db.QueryRow(cctx, `SELECT rec FROM catalogs WHERE broker = $1`, b(broker)).Scan(&rec)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.BrokerCatalogs{}, store.NoCatalogs(broker)
	case err != nil:
		return store.BrokerCatalogs{}, s.fail(ctx, "get catalogs", err)
	}
	return store.DecodeCatalogs(rec)
}

func (s *pgStore) ListCatalogs(ctx context.Context) ([]store.BrokerCatalogs, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	return collect(s, ctx, cctx, "list catalogs", func(r pgx.CollectableRow) (store.BrokerCatalogs, error) {
		var rec []byte
		if err := r.Scan(&rec); err != nil {
			return store.BrokerCatalogs{}, err
		}
		return store.DecodeCatalogs(rec)
	}, `SELECT rec FROM catalogs ORDER BY broker`)
}

func (s *pgStore) PutCatalogs(ctx context.Context, bc store.BrokerCatalogs, ifAccepted string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	bc, enc, err := store.PrepareCatalogs(bc)
	if err != nil {
		return err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var sql string
	if ifAccepted == "" { // no record, or one without an accepted catalog
		sql = `INSERT INTO catalogs AS c (broker, accepted_hash, rec) VALUES ($1, $2, $3)
ON CONFLICT (broker) DO UPDATE SET accepted_hash = excluded.accepted_hash, rec = excluded.rec
WHERE c.accepted_hash = $4`
	} else {
		sql = `UPDATE catalogs SET accepted_hash = $2, rec = $3 WHERE broker = $1 AND accepted_hash = $4`
	}
	tag, err := s.db.Exec(cctx, sql, b(bc.Broker), bc.Accepted.Hash, enc, ifAccepted)
	if err != nil {
		return s.fail(ctx, "put catalogs", err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var got string
	err = s.db.QueryRow(cctx, `SELECT accepted_hash FROM catalogs WHERE broker = $1`, b(bc.Broker)).Scan(&got)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return s.fail(ctx, "put catalogs", err)
	}
	return store.ChangedCatalogs(bc.Broker, ifAccepted, got)
}

func (s *pgStore) DeleteCatalogs(ctx context.Context, broker string) error {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	tag, err := s.db.Exec(cctx, `DELETE FROM catalogs WHERE broker = $1`, b(broker))
	switch {
	case err != nil:
		return s.fail(ctx, "delete catalogs", err)
	case tag.RowsAffected() == 0:
		return store.NoCatalogs(broker)
	}
	return nil
}
