package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// db is the pool as the store uses it: a statement that meets a pooled
// connection the server already ended (a restart, a failover: the server
// said so with an admin_shutdown or crash_shutdown error, or pgconn knows
// nothing was sent) runs again on another connection, as many times as
// the pool may hold such connections. That statement never ran, so
// running it again is safe; without the retry every connection used in
// the second before a restart would cost a call a 503.
type db struct {
	pool  *pgxpool.Pool
	tries int // the pool's size and one
}

// retryable reports whether err says the statement never reached a live
// server session.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P01" || pe.Code == "57P02" // admin_shutdown, crash_shutdown
	}
	return err != nil && pgconn.SafeToRetry(err)
}

func (d db) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	var err error
	for range d.tries {
		if tag, err = d.pool.Exec(ctx, sql, args...); !retryable(err) || ctx.Err() != nil {
			break
		}
	}
	return tag, err
}

func (d db) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	var rows pgx.Rows
	var err error
	for range d.tries {
		if rows, err = d.pool.Query(ctx, sql, args...); !retryable(err) || ctx.Err() != nil {
			break
		}
	}
	return rows, err
}

// QueryRow returns a row whose Scan runs the statement again when its
// first error is retryable.
func (d db) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return retryRow{d: d, ctx: ctx, sql: sql, args: args}
}

type retryRow struct {
	d    db
	ctx  context.Context
	sql  string
	args []any
}

func (r retryRow) Scan(dest ...any) error {
	var err error
	for range r.d.tries {
		if err = r.d.pool.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...); !retryable(err) || r.ctx.Err() != nil {
			break
		}
	}
	return err
}

// Begin starts a transaction; its BEGIN is retried as a statement.
func (d db) Begin(ctx context.Context) (pgx.Tx, error) {
	var tx pgx.Tx
	var err error
	for range d.tries {
		if tx, err = d.pool.Begin(ctx); !retryable(err) || ctx.Err() != nil {
			break
		}
	}
	return tx, err
}

// Batch sends b in one round trip, one implicit transaction (a statement
// that fails takes the ones before it back), and reads its results with
// read; again on another connection when its first error says it never
// reached a live server session.
func (d db) Batch(ctx context.Context, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	var err error
	for range d.tries {
		br := d.pool.SendBatch(ctx, b)
		err = read(br)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if !retryable(err) || ctx.Err() != nil {
			break
		}
	}
	return err
}
