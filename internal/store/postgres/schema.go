package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The schema, versioned: migrations[i] takes the schema from version i to
// i+1, and schema_migrations records each version applied. A store
// migrates on its first call (Ping aside) in one transaction under
// pg_advisory_xact_lock(migrationLock), so replicas starting together
// wait for each other and the second finds the work done. Migrations only
// add: a gateway finding a newer version than it knows works on it.
//
// Tables (names resolve through the connection's search_path):
//
//	locks          key, owner, deadline_us, rec (lock JSON), replaced (the expired lock an Acquire took over)
//	orphans        id, next_us, claimed_by, claimed_until_us, rec (orphan JSON without its claim)
//	instances      broker, instance_id, tenant, rec (packed record)
//	bindings       broker, instance_id, binding_id, expires_us (NULL: none), rec (packed record)
//	instance_counts, binding_counts
//	               instances per broker and tenant, bindings per broker: kept by
//	               triggers in the transaction of every write, so counts read no records
//	usage_records  id, deleted_us, broker, rec (usage encoding without Deleted)
//	catalogs       broker, accepted_hash, rec (catalog record JSON)
//	console_sessions
//	               key (SHA-256 of the session id), expires_us, rec (session JSON)
var migrations = []string{
	// 1: everything the store keeps.
	`CREATE TABLE locks (
	key bytea PRIMARY KEY,
	owner bytea NOT NULL,
	deadline_us bigint NOT NULL,
	rec bytea NOT NULL,
	replaced bytea
);
CREATE INDEX locks_deadline ON locks (deadline_us);
CREATE TABLE orphans (
	id bytea PRIMARY KEY,
	next_us bigint NOT NULL,
	claimed_by bytea NOT NULL DEFAULT '',
	claimed_until_us bigint NOT NULL DEFAULT 0,
	rec bytea NOT NULL
);
CREATE INDEX orphans_due ON orphans (next_us, id);
CREATE TABLE instances (
	broker bytea NOT NULL,
	instance_id bytea NOT NULL,
	tenant bytea NOT NULL,
	rec bytea NOT NULL,
	PRIMARY KEY (broker, instance_id)
);
CREATE TABLE instance_counts (
	broker bytea NOT NULL,
	tenant bytea NOT NULL,
	n bigint NOT NULL,
	PRIMARY KEY (broker, tenant)
);
CREATE FUNCTION count_instance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP <> 'INSERT' THEN
		UPDATE instance_counts SET n = n - 1 WHERE broker = OLD.broker AND tenant = OLD.tenant;
	END IF;
	IF TG_OP <> 'DELETE' THEN
		INSERT INTO instance_counts AS c VALUES (NEW.broker, NEW.tenant, 1)
		ON CONFLICT (broker, tenant) DO UPDATE SET n = c.n + 1;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER instances_counted AFTER INSERT OR DELETE ON instances
	FOR EACH ROW EXECUTE FUNCTION count_instance();
CREATE TRIGGER instances_recounted AFTER UPDATE ON instances
	FOR EACH ROW WHEN (OLD.tenant IS DISTINCT FROM NEW.tenant) EXECUTE FUNCTION count_instance();
CREATE TABLE bindings (
	broker bytea NOT NULL,
	instance_id bytea NOT NULL,
	binding_id bytea NOT NULL,
	expires_us bigint,
	rec bytea NOT NULL,
	PRIMARY KEY (broker, instance_id, binding_id)
);
CREATE INDEX bindings_expiry ON bindings (expires_us) WHERE expires_us IS NOT NULL;
CREATE TABLE binding_counts (
	broker bytea PRIMARY KEY,
	n bigint NOT NULL
);
CREATE FUNCTION count_binding() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' THEN
		UPDATE binding_counts SET n = n - 1 WHERE broker = OLD.broker;
	ELSE
		INSERT INTO binding_counts AS c VALUES (NEW.broker, 1)
		ON CONFLICT (broker) DO UPDATE SET n = c.n + 1;
	END IF;
	RETURN NULL;
END $$;
CREATE TRIGGER bindings_counted AFTER INSERT OR DELETE ON bindings
	FOR EACH ROW EXECUTE FUNCTION count_binding();
CREATE TABLE usage_records (
	id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	deleted_us bigint NOT NULL,
	broker bytea NOT NULL,
	rec bytea NOT NULL
);
CREATE INDEX usage_records_deleted ON usage_records (deleted_us, id);
CREATE INDEX usage_records_broker ON usage_records (broker, deleted_us, id);
CREATE TABLE catalogs (
	broker bytea PRIMARY KEY,
	accepted_hash text NOT NULL,
	rec bytea NOT NULL
);`,
	// 2: the console's sessions (session.go).
	`CREATE TABLE console_sessions (
	key bytea PRIMARY KEY,
	expires_us bigint NOT NULL,
	rec bytea NOT NULL
);
CREATE INDEX console_sessions_expires ON console_sessions (expires_us);`,
}

// SchemaVersion is the schema version this gateway writes.
var SchemaVersion = len(migrations)

// migrationLock is the pg_advisory_xact_lock key of migrations: "osbgw"
// in ASCII, a number no other tool is likely to take.
const migrationLock = 0x6f7362677700

// migrate brings the schema to SchemaVersion, once per process.
func (s *pgStore) migrate(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.migrated.Load() {
		return nil
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
	version integer PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
			return err
		}
		for v := have; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migration to version %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.migrated.Store(true)
	return nil
}

// Migrate brings the schema of st, a Store Open returned, to
// SchemaVersion now rather than on its first call: what the gateway does
// at start. Its error wraps store.ErrUnavailable when the database does
// not answer.
func Migrate(ctx context.Context, st store.Store) error {
	s, ok := st.(*pgStore)
	if !ok {
		return errors.New("store: postgres.Migrate of a store of another backend")
	}
	_, cancel, err := s.begin(ctx)
	if err != nil {
		return err
	}
	cancel()
	return nil
}

// Schema is what Status reports of a database.
type Schema struct {
	// Version is the schema version the database holds (0: none yet).
	Version int
	// Want is SchemaVersion, the version this gateway writes.
	Want int
}

// Current reports whether the database's schema is the one this gateway
// writes, or newer (migrations only add).
func (sc Schema) Current() bool { return sc.Version >= sc.Want }

// Status connects to the database of st, a Store Open returned, and
// reports its schema version without migrating it: for osb-gateway check.
// Its error wraps store.ErrUnavailable when the database does not answer.
func Status(ctx context.Context, st store.Store) (Schema, error) {
	s, ok := st.(*pgStore)
	if !ok {
		return Schema{}, errors.New("store: postgres.Status of a store of another backend")
	}
	if err := s.Ping(ctx); err != nil {
		return Schema{}, err
	}
	sc := Schema{Want: SchemaVersion}
	var exists bool
	if err := s.db.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return Schema{}, s.fail(ctx, "look for schema_migrations", err)
	}
	if !exists {
		return sc, nil
	}
	if err := s.db.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&sc.Version); err != nil {
		return Schema{}, s.fail(ctx, "read schema_migrations", err)
	}
	return sc, nil
}
