package postgres

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// statements is a pgx tracer counting the statements a store sends.
type statements struct{ n atomic.Int64 }

func (c *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestPostgresAcquireOneStatement: Acquire sends one statement when it
// takes a free key, an expired lock (reporting it as Replaced) or its own
// lock; only a held lock costs a second statement, to read the holder.
func TestPostgresAcquireOneStatement(t *testing.T) {
	srv := storetest.StartPostgres(t)
	clock := osbtest.NewClock(storetest.T0)
	var count statements
	s, err := open(srv.StoreConfig(t).WithDefaults().Postgres, clock.Now, &count)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Get(ctx, "warm-up"); !errors.Is(err, store.ErrNotFound) { // migrates
		t.Fatal(err)
	}
	acquire := func(l store.Lock) (store.Lock, int64, error) {
		count.n.Store(0)
		got, err := s.Acquire(ctx, l)
		return got, count.n.Load(), err
	}
	if _, n, err := acquire(storetest.Lock("i1", "a", time.Minute)); err != nil || n != 1 {
		t.Fatalf("free key: err %v, %d statements, want nil and 1", err, n)
	}
	if _, n, err := acquire(storetest.Lock("i1", "a", 2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("same owner: err %v, %d statements, want nil and 1", err, n)
	}
	if got, n, err := acquire(storetest.Lock("i1", "b", time.Minute)); !errors.Is(err, store.ErrHeld) || got.Owner != "a" || n != 2 {
		t.Fatalf("held: holder %q, err %v, %d statements, want a, ErrHeld and 2", got.Owner, err, n)
	}
	clock.Advance(3 * time.Minute)
	got, n, err := acquire(store.Lock{Key: store.LockKey("b1", "i1"), Owner: "b", Kind: store.KindUpdate,
		Deadline: clock.Now().Add(time.Minute)})
	if err != nil || n != 1 || got.Replaced == nil || got.Replaced.Owner != "a" {
		t.Fatalf("expired: replaced %+v, err %v, %d statements, want a's lock, nil and 1", got.Replaced, err, n)
	}
}

// roundTrips is a pgx tracer counting statements and batches: a batch is
// one round trip, whatever it holds.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestPostgresAcquireReadingOneRoundTrip: AcquireReading sends the
// acquire and the record's read in one batch, once its statements are
// prepared; a held lock costs a second statement, to read the holder, as
// Acquire's. A batch whose read fails takes the acquire back: one
// implicit transaction.
func TestPostgresAcquireReadingOneRoundTrip(t *testing.T) {
	srv := storetest.StartPostgres(t)
	clock := osbtest.NewClock(storetest.T0)
	var count roundTrips
	s, err := open(srv.StoreConfig(t).WithDefaults().Postgres, clock.Now, &count)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	in := storetest.MustPutInstance(t, s, storetest.Instance("b1", "i1", "cf1"))
	if _, _, err := s.AcquireReading(ctx, storetest.Lock("warm-up", "a", time.Minute)); err != nil { // prepares
		t.Fatal(err)
	}
	count.n.Store(0)
	if _, rec, err := s.AcquireReading(ctx, storetest.Lock("i1", "a", time.Minute)); err != nil || rec == nil || !rec.Created.Equal(in.Created) {
		t.Fatalf("free key: record %v, %v", rec, err)
	}
	if n := count.n.Load(); n != 1 {
		t.Errorf("free key: %d round trips, want 1", n)
	}
	count.n.Store(0)
	if got, _, err := s.AcquireReading(ctx, storetest.Lock("i1", "b", time.Minute)); !errors.Is(err, store.ErrHeld) || got.Owner != "a" {
		t.Fatalf("held: holder %q, %v; want a and ErrHeld", got.Owner, err)
	}
	if n := count.n.Load(); n != 2 {
		t.Errorf("held: %d round trips, want 2", n)
	}

	// The read fails (its table is gone): the acquire is taken back.
	if _, err := s.pool.Exec(ctx, `ALTER TABLE instances RENAME TO instances_gone`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.AcquireReading(ctx, storetest.Lock("i2", "c", time.Minute)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("AcquireReading with its read failing: %v, want ErrUnavailable", err)
	}
	if _, err := s.Get(ctx, store.LockKey("b1", "i2")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the lock after a batch whose read failed: %v, want none", err)
	}
}

// TestPostgresDown: with the server down every call fails within the
// connect timeout with ErrUnavailable (so the gateway answers 503), and
// the same Store works again once the server is back.
func TestPostgresDown(t *testing.T) {
	srv := storetest.StartPostgres(t)
	cfg := srv.StoreConfig(t)
	cfg.Postgres.ConnectTimeout, cfg.Postgres.StatementTimeout = 2*time.Second, 2*time.Second
	clock := osbtest.NewClock(storetest.T0)
	s := openAt(t, cfg, clock.Now)
	ctx := context.Background()
	if _, err := s.Acquire(ctx, storetest.Lock("i1", "a", time.Minute)); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	start := time.Now()
	for _, call := range []func() error{
		func() error { _, err := s.Acquire(ctx, storetest.Lock("i2", "a", time.Minute)); return err },
		func() error { return s.Release(ctx, store.LockKey("b1", "i1"), "a") },
		func() error { _, err := s.PutInstance(ctx, store.Instance{Broker: "b1", InstanceID: "i1"}); return err },
		func() error { return s.Ping(ctx) },
	} {
		if err := call(); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("server down: err %v, want ErrUnavailable", err)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("server down: four calls took %s", d)
	}
	srv.Start()
	if err := s.Release(ctx, store.LockKey("b1", "i1"), "a"); err != nil {
		t.Fatalf("server back: Release: %v", err)
	}
}

// TestPostgresRestart: after a restart of the server (as after a
// failover), calls on a Store whose pool holds connections the server
// ended run on fresh ones: none fails.
func TestPostgresRestart(t *testing.T) {
	srv := storetest.StartPostgres(t)
	cfg := srv.StoreConfig(t)
	cfg.Postgres.MaxConns = 4
	s := openAt(t, cfg, nil)
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	var conns []*pgxpool.Conn // fill the pool: every connection will be dead
	for range 4 {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	srv.Stop()
	srv.Start()
	for i, call := range []func() error{
		func() error { return s.Ping(ctx) },
		func() error { _, err := s.Acquire(ctx, storetest.Lock("i1", "a", time.Minute)); return err },
		func() error { _, err := s.Get(ctx, store.LockKey("b1", "i1")); return err },
		func() error { _, err := s.PutInstance(ctx, store.Instance{Broker: "b1", InstanceID: "i1"}); return err },
	} {
		if err := call(); err != nil {
			t.Fatalf("call %d after the restart: %v", i, err)
		}
	}
}

// TestPostgresHung: a server that accepts but answers nothing (every
// process stopped) costs a call at most the statement and connect
// timeouts, then ErrUnavailable; the Store works again once it answers.
func TestPostgresHung(t *testing.T) {
	srv := storetest.StartPostgres(t)
	cfg := srv.StoreConfig(t)
	cfg.Postgres.ConnectTimeout, cfg.Postgres.StatementTimeout = time.Second, time.Second
	s := openAt(t, cfg, nil)
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, storetest.Lock("i1", "a", time.Minute)); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	start := time.Now()
	_, err := s.Acquire(ctx, storetest.Lock("i2", "a", time.Minute))
	if d := time.Since(start); !errors.Is(err, store.ErrUnavailable) || d > 10*time.Second {
		t.Fatalf("hung server: err %v after %s, want ErrUnavailable within the 2 s of timeouts (and slack)", err, d)
	}
	t.Logf("hung server: %v after %s", err, time.Since(start))
	srv.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Release(ctx, store.LockKey("b1", "i1"), "a")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server answering again: Release: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPostgresMigrateTogether: stores starting together on an empty
// schema migrate it once; Status reports the version before and after.
func TestPostgresMigrateTogether(t *testing.T) {
	srv := storetest.StartPostgres(t)
	cfg := srv.StoreConfig(t)
	ctx := context.Background()
	first := openAt(t, cfg, nil)
	if sc, err := Status(ctx, first); err != nil || sc.Version != 0 || sc.Current() {
		t.Fatalf("before: %+v, %v; want version 0, not current", sc, err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		s := openAt(t, cfg, nil)
		wg.Go(func() { _, errs[i] = s.GetOrphan(ctx, "none") })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("store %d: %v, want ErrNotFound", i, err)
		}
	}
	sc, err := Status(ctx, first)
	if err != nil || sc.Version != SchemaVersion || !sc.Current() {
		t.Fatalf("after: %+v, %v; want version %d, current", sc, err, SchemaVersion)
	}
	var rows int
	if err := first.pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&rows); err != nil || rows != SchemaVersion {
		t.Fatalf("schema_migrations: %d rows, %v; want %d", rows, err, SchemaVersion)
	}
}

// TestPostgresMultiHost: a URL naming a host that does not answer before
// the primary, with target_session_attrs=read-write, reaches the primary:
// how the gateway follows a failover.
func TestPostgresMultiHost(t *testing.T) {
	srv := storetest.StartPostgres(t)
	cfg := srv.StoreConfig(t)
	dead := osbtest.DeadAddr(t)
	cfg.Postgres.URL = strings.Replace(cfg.Postgres.URL, "@"+srv.Addr+"/", "@"+dead+","+srv.Addr+"/", 1) +
		"&target_session_attrs=read-write"
	cfg.Postgres.ConnectTimeout = 2 * time.Second
	s := openAt(t, cfg, nil)
	if _, err := s.PutInstance(context.Background(), store.Instance{Broker: "b1", InstanceID: "i1"}); err != nil {
		t.Fatalf("multi-host URL %s: %v", cfg.Postgres.URL, err)
	}
}

// TestPostgresSecretNotInErrors: neither a URL that does not parse nor a
// server that does not answer puts the URL's password in an error.
func TestPostgresSecretNotInErrors(t *testing.T) {
	const secret = "s3cr3t-pw"
	_, err := Open(store.PostgresConfig{URL: "postgres://u:" + secret + "@127.0.0.1:5432/db?sslmode=nonsense"}, nil)
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("bad URL: %v; want an error without the password", err)
	}
	host, port, _ := net.SplitHostPort(osbtest.DeadAddr(t))
	p, _ := strconv.Atoi(port)
	for _, url := range []string{
		"postgres://u:" + secret + "@" + net.JoinHostPort(host, strconv.Itoa(p)) + "/db?sslmode=disable",
		"host=" + host + " port=" + port + " user=u password=" + secret + " dbname=db sslmode=disable",
	} {
		s, err := Open(store.PostgresConfig{URL: url, ConnectTimeout: time.Second, StatementTimeout: time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Acquire(context.Background(), storetest.Lock("i1", "a", time.Minute))
		s.Close()
		if !errors.Is(err, store.ErrUnavailable) || strings.Contains(err.Error(), secret) {
			t.Fatalf("server down: %v; want ErrUnavailable without the password", err)
		}
	}
}
