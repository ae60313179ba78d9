// Package postgres is the "postgres" backend of internal/store, shared by
// the gateway's replicas like redis: one PostgreSQL database (or schema,
// by the URL's search_path) reached through pgx's connection pool, as
// store.PostgresConfig describes. Every change to a lock, an orphan or a
// record is one statement or one short transaction; none is held open
// across anything but the store's own statements. It passes
// storetest.Contract, like every backend.
//
// Times are compared as microseconds since 1970 that the store's clock
// (the now given to Open) passes as parameters, never the server's now():
// the store's clock decides expiry, as on every backend.
//
// Keys, ids, names and owners are bytea, so that they sort in byte order
// (the order of the contract's listings, whatever the database's
// collation) and may hold any byte. Records are the shared encodings of
// internal/store (JSON for locks, orphans and catalog records, the packed
// inventory records, the usage encoding) in bytea columns beside the
// indexed columns queries filter on.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// pgStore is the "postgres" backend.
type pgStore struct {
	pool *pgxpool.Pool
	db   db // the pool, retrying statements that met a connection the server ended
	now  func() time.Time
	cfg  store.PostgresConfig // as opened, defaults applied
	// callTimeout bounds each call: the statement timeout, and the time
	// to connect once.
	callTimeout time.Duration

	closed atomic.Bool
	// migrated is set once the schema is current (migrate); mu
	// serialises the migrations of this process.
	migrated atomic.Bool
	mu       sync.Mutex
}

// Open returns a Store on the PostgreSQL database cfg.URL names, with cfg
// taken as it is (backend.Open applies store.Config's defaults first). now
// is the store's clock (nil means time.Now); it decides which locks have
// expired. Open does not connect yet (like sql.Open): Ping checks that the
// database answers, and the first other call migrates the schema (see
// Migrate). A URL that does not parse is an error that does not repeat it
// (it may hold a password).
func Open(cfg store.PostgresConfig, now func() time.Time) (store.Store, error) {
	s, err := open(cfg, now, nil)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// open is Open, returning the backend's own type; tracer, if not nil,
// sees every statement (the tests count them).
func open(cfg store.PostgresConfig, now func() time.Time, tracer pgx.QueryTracer) (*pgStore, error) {
	if now == nil {
		now = time.Now
	}
	if cfg.URL == "" {
		return nil, errors.New("store: postgres: no URL")
	}
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		// pgconn's parse errors may quote the URL: say what, not where.
		return nil, errors.New("store: postgres: the URL does not parse as a libpq URL or key=value DSN")
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	cc := pc.ConnConfig
	cc.Tracer = tracer
	if cc.ConnectTimeout == 0 && cfg.ConnectTimeout > 0 { // per host of a multi-host URL
		cc.ConnectTimeout = cfg.ConnectTimeout
	}
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if cfg.StatementTimeout > 0 {
		cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = "osb-gateway"
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %w", store.ErrUnavailable, err)
	}
	timeout := cfg.StatementTimeout + cc.ConnectTimeout
	if cfg.StatementTimeout <= 0 || cc.ConnectTimeout <= 0 {
		timeout = 0 // unbounded but for the caller's context
	}
	return &pgStore{pool: pool, db: db{pool: pool, tries: int(pc.MaxConns) + 1}, now: now, cfg: cfg, callTimeout: timeout}, nil
}

// begin starts a call: the context's error, ErrClosed, or a context
// bounded by callTimeout on a migrated schema. The caller must call the
// CancelFunc when it returns nil.
func (s *pgStore) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if s.closed.Load() {
		return nil, nil, store.ErrClosed
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if s.callTimeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, s.callTimeout)
	}
	if !s.migrated.Load() {
		if err := s.migrate(cctx); err != nil {
			cancel()
			return nil, nil, s.fail(ctx, "migrate the schema", err)
		}
	}
	return cctx, cancel, nil
}

// fail maps an error of a pgx call: the caller's context's error if it
// ended, ErrClosed after Close, otherwise a failure of the backend (the
// network, the call's own timeout, the server's statement_timeout, an
// error the server answered). The store's own outcomes never come back as
// errors of pgx.
func (s *pgStore) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if s.closed.Load() {
		return store.ErrClosed
	}
	if errors.Is(err, store.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: postgres %s: %w", store.ErrUnavailable, op, err)
}

// collect runs the query sql on cctx and scans each row with scan; a
// failure of either is s.fail's, under op.
func collect[T any](s *pgStore, ctx, cctx context.Context, op string, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := s.db.Query(cctx, sql, args...)
	if err != nil {
		return nil, s.fail(ctx, op, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, s.fail(ctx, op, err)
	}
	return out, nil
}

func (s *pgStore) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return store.ErrClosed
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if s.callTimeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, s.callTimeout)
	}
	defer cancel()
	_, err := s.db.Exec(cctx, ";") // what pgx's Ping sends, retried as every statement
	return s.fail(ctx, "ping", err)
}

// Close closes the pool, waiting for the connections in use to come back.
func (s *pgStore) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.pool.Close()
	}
	return nil
}

// b is a string as a bytea parameter.
func b(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}

// opt is a filter parameter: NULL for "" (match all), else bytea.
func opt(s string) any {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// us is t in microseconds since 1970: how the store compares times.
func us(t time.Time) int64 { return t.UnixMicro() }

// inTx runs fn in a transaction on ctx and commits it; fn's error (or the
// commit's) rolls it back.
func (s *pgStore) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.db, fn)
}

// ServerTime is the PostgreSQL server's clock (clock_timestamp()): the
// clock the replicas sharing it set and judge deadlines by
// (store.ServerClock).
func (s *pgStore) ServerTime(ctx context.Context) (time.Time, error) {
	if s.closed.Load() {
		return time.Time{}, store.ErrClosed
	}
	cctx, cancel := ctx, context.CancelFunc(func() {})
	if s.callTimeout > 0 {
		cctx, cancel = context.WithTimeout(ctx, s.callTimeout)
	}
	defer cancel()
	var t time.Time
	if err := s.db.QueryRow(cctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		return time.Time{}, s.fail(ctx, "clock_timestamp", err)
	}
	return t, nil
}
