package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The console sessions of the postgres backend: a row per session, keyed
// by the SHA-256 of its id (never the id), its Expires beside the record.
// A put deletes the expired rows in the same statement.

func (s *pgStore) PutSession(ctx context.Context, k store.SessionKey, se store.Session) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.now()
	se, enc, err := store.PrepareSession(se, now)
	if err != nil {
		return err
	}
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = s.db.Exec(cctx, `WITH gone AS (DELETE FROM console_sessions WHERE expires_us <= $4 AND key <> $1)
INSERT INTO console_sessions (key, expires_us, rec) VALUES ($1, $2, $3)
ON CONFLICT (key) DO UPDATE SET expires_us = excluded.expires_us, rec = excluded.rec`,
		k[:], se.Expires.UnixMicro(), enc, now.UnixMicro())
	return s.fail(ctx, "put session", err)
}

func (s *pgStore) GetSession(ctx context.Context, k store.SessionKey) (store.Session, error) {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return store.Session{}, err
	}
	defer cancel()
	var rec []byte
	err = s.db.QueryRow(cctx, `SELECT rec FROM console_sessions WHERE key = $1`, k[:]).Scan(&rec)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return store.Session{}, s.fail(ctx, "get session", err)
	}
	return store.LiveSession(k, rec, err == nil, s.now())
}

func (s *pgStore) DeleteSession(ctx context.Context, k store.SessionKey) error {
	cctx, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = s.db.Exec(cctx, `DELETE FROM console_sessions WHERE key = $1`, k[:])
	return s.fail(ctx, "delete session", err)
}
