package config

import (
	"cmp"
	"strings"
	"time"
)

// Defaults of the state section and of per-broker guard settings.
const (
	DefaultStateBackend      = "bolt"           // state.backend
	DefaultStatePath         = "osb-gateway.db" // state.path
	DefaultRedisKeyPrefix    = "osb-gateway:"   // state.redis.key_prefix
	DefaultOperationDeadline = 7 * 24 * time.Hour
	DefaultSweepInterval     = time.Minute     // state.sweep_interval
	DefaultReconcileAfter    = 5 * time.Minute // state.reconcile.after (state.watch_after, its deprecated alias)
	DefaultReconcileEvery    = 5 * time.Minute // state.reconcile.every
	DefaultReconcileEnabled  = true            // state.reconcile.enabled
	DefaultConcurrencyError  = "blocking"      // brokers[].concurrency_error
	DefaultOrphanMitigation  = "report"        // brokers[].orphan_mitigation
	DefaultOrphanSchedule    = "10s,1m,5m,15m,1h,4h"
	DefaultLockGranularity   = "binding" // brokers[].lock_granularity
)

// Defaults of state.postgres.
const (
	DefaultPostgresMaxConns         = 10              // state.postgres.max_conns
	DefaultPostgresStatementTimeout = 5 * time.Second // state.postgres.statement_timeout
	DefaultPostgresConnectTimeout   = 5 * time.Second // state.postgres.connect_timeout
)

// State is where the gateway keeps operation locks and the orphan queue.
type State struct {
	// Backend is "bolt" (an embedded file: survives restarts of one
	// process), "redis" or "postgres" (shared by replicas) or "memory"
	// (lost at exit; for tests and throwaway runs). Zero value:
	// DefaultStateBackend.
	Backend string `yaml:"backend" validate:"oneof=bolt redis postgres memory"`
	// Path is the bolt file; zero value: DefaultStatePath. A relative path
	// is relative to the configuration file's directory, as every other
	// path in the file (Load resolves it).
	Path  string     `yaml:"path"`
	Redis StateRedis `yaml:"redis"`
	// Postgres is the PostgreSQL database of backend postgres.
	Postgres StatePostgres `yaml:"postgres"`
	// OperationDeadline is how long an asynchronous operation may hold its
	// instance when the plan has no maximum_polling_duration; then the lock
	// is released and the expiry logged. Zero value: 7 days, as Cloud
	// Controller.
	OperationDeadline time.Duration `yaml:"operation_deadline" validate:"gt=0"`
	// SweepInterval is how often expired locks are released and logged even
	// if nobody polls. Zero value: DefaultSweepInterval.
	SweepInterval time.Duration `yaml:"sweep_interval" validate:"gt=0"`
	// Reconcile is the background reconciler: the gateway's own polls of
	// the async operations no platform settled.
	Reconcile StateReconcile `yaml:"reconcile"`
	// WatchAfter is the deprecated name of Reconcile.After (the reconciler
	// was called the watch): when set and Reconcile.After is not, it is
	// Reconcile.After, and Reconcile.Every too when that is not set either
	// (the watch polled an operation again after another watch_after).
	// Setting both it and Reconcile.After is an error. Zero value: unset.
	WatchAfter time.Duration `yaml:"watch_after" validate:"gte=0"`
}

// StateReconcile is the background reconciler (state.reconcile). A
// platform that lost an async operation's 202, or stopped polling it,
// leaves its instance blocked until the operation's deadline, days away;
// the reconciler polls the broker's last_operation for such an operation
// itself once it is older than After, again every Every while the broker
// says it is in progress, and settles it (inventory, lock) as a platform's
// poll would once the broker says it ended.
type StateReconcile struct {
	// Enabled turns the background reconciler on; unset:
	// DefaultReconcileEnabled. Operators can reconcile one operation
	// (POST /admin/operations/.../reconcile) whatever it says.
	Enabled *bool `yaml:"enabled"`
	// After is the age past which an async operation is polled. Zero
	// value: state.watch_after when set, else DefaultReconcileAfter.
	After time.Duration `yaml:"after" validate:"gte=0"`
	// Every is how often the reconciler runs, and so how often an
	// operation still in progress is polled again; a lock whose broker
	// finished is settled within one Every once it is older than After.
	// Zero value: state.watch_after when set, else DefaultReconcileEvery.
	Every time.Duration `yaml:"every" validate:"gte=0"`
}

// On reports whether the background reconciler runs
// (DefaultReconcileEnabled when Enabled is unset).
func (r StateReconcile) On() bool { return r.Enabled == nil || *r.Enabled }

// SweepTick is how often the gateway sweeps its locks: every
// state.sweep_interval, or every state.reconcile.every when the reconciler
// runs and that is shorter, so that it runs within each Every.
func (s State) SweepTick() time.Duration {
	if s.Reconcile.On() && s.Reconcile.Every > 0 && s.Reconcile.Every < s.SweepInterval {
		return s.Reconcile.Every
	}
	return s.SweepInterval
}

// StateRedis reaches Redis with go-redis' universal client: one address is
// a standalone server, master_name selects Sentinel, several addresses
// without master_name are a Cluster.
type StateRedis struct {
	Addrs        []string      `yaml:"addrs"`
	Username     string        `yaml:"username"`
	Password     Secret        `yaml:"password"`
	PasswordFile string        `yaml:"password_file"`
	DB           int           `yaml:"db" validate:"gte=0"`
	MasterName   string        `yaml:"master_name"`
	KeyPrefix    string        `yaml:"key_prefix"`
	DialTimeout  time.Duration `yaml:"dial_timeout" validate:"gte=0"`
	ReadTimeout  time.Duration `yaml:"read_timeout" validate:"gte=0"`
	WriteTimeout time.Duration `yaml:"write_timeout" validate:"gte=0"`
	TLS          bool          `yaml:"tls"`
	// ReplicaAcks is how many replicas must acknowledge each write a
	// promise rests on (WAIT) before it counts; 0 (the default): none.
	// ReplicaAckTimeout bounds each wait (default 1s).
	ReplicaAcks       int           `yaml:"replica_acks" validate:"gte=0"`
	ReplicaAckTimeout time.Duration `yaml:"replica_ack_timeout" validate:"gte=0"`
}

// StatePostgres reaches PostgreSQL with pgx's pool (state.postgres).
type StatePostgres struct {
	// URL is a libpq URL (postgres://user:password@host:port/db?…) or
	// key=value DSN. It may hold a password, so it is a Secret: from
	// url_file or ${ENV} rather than inline. Several hosts with
	// target_session_attrs=read-write follow a failover.
	URL Secret `yaml:"url"`
	// URLFile is a file holding URL (a trailing newline is ignored).
	URLFile string `yaml:"url_file"`
	// MaxConns caps the pool; zero value: DefaultPostgresMaxConns.
	MaxConns int `yaml:"max_conns" validate:"gte=0,lte=10000"`
	// StatementTimeout is the server's statement_timeout for the
	// gateway's connections; zero value: DefaultPostgresStatementTimeout.
	StatementTimeout time.Duration `yaml:"statement_timeout" validate:"gte=0"`
	// ConnectTimeout bounds connecting to one host; zero value:
	// DefaultPostgresConnectTimeout.
	ConnectTimeout time.Duration `yaml:"connect_timeout" validate:"gte=0"`
}

func (s *State) applyDefaults() {
	if s.Backend == "" {
		s.Backend = DefaultStateBackend
	}
	if s.Path == "" {
		s.Path = DefaultStatePath
	}
	if s.Redis.KeyPrefix == "" {
		s.Redis.KeyPrefix = DefaultRedisKeyPrefix
	}
	if s.Postgres.MaxConns == 0 {
		s.Postgres.MaxConns = DefaultPostgresMaxConns
	}
	setDuration(&s.Postgres.StatementTimeout, DefaultPostgresStatementTimeout)
	setDuration(&s.Postgres.ConnectTimeout, DefaultPostgresConnectTimeout)
	setDuration(&s.OperationDeadline, DefaultOperationDeadline)
	setDuration(&s.SweepInterval, DefaultSweepInterval)
	if s.Reconcile.Enabled == nil {
		on := DefaultReconcileEnabled
		s.Reconcile.Enabled = &on
	}
	// Only where state.watch_after would not be overruled (checkState
	// reports both set): its value stays for that check.
	if s.Reconcile.After == 0 {
		setDuration(&s.Reconcile.After, cmp.Or(s.WatchAfter, DefaultReconcileAfter))
	}
	setDuration(&s.Reconcile.Every, cmp.Or(s.WatchAfter, DefaultReconcileEvery))
}

// checkState reports cross-field problems of the state section.
func checkState(c *Config, probs *Problems) {
	if c.State.WatchAfter != 0 && c.State.Reconcile.After != c.State.WatchAfter {
		probs.addf("state.watch_after", "is the deprecated name of state.reconcile.after: set one of them, not both")
	}
	if c.State.Backend == "redis" {
		if len(c.State.Redis.Addrs) == 0 {
			probs.addf("state.redis.addrs", "is required with backend redis")
		}
		for i, a := range c.State.Redis.Addrs {
			if msg := checkHostPort(a); msg != "" {
				probs.addf(joinIndex("state.redis.addrs", i), "must be host:port (%s)", msg)
			}
		}
		if r := c.State.Redis; r.ReplicaAcks > 0 && r.MasterName == "" && len(r.Addrs) > 1 {
			probs.addf("state.redis.replica_acks", "works with a standalone Redis or Sentinel (state.redis.master_name), not with a Cluster (%d addrs without master_name): a Cluster's writes go to several primaries", len(r.Addrs))
		}
	}
	if c.State.Backend == "postgres" {
		switch u := c.State.Postgres.URL.Reveal(); {
		case u == "":
			probs.addf("state.postgres.url", "is required with backend postgres (or set url_file)")
		case !looksLikePostgresURL(u):
			// Never the value: it may hold a password.
			probs.addf("state.postgres.url", "must be a libpq URL (postgres://user@host:5432/db?...) or a key=value DSN (host=... dbname=...)")
		}
	}
}

// looksLikePostgresURL reports whether u has the form of a libpq URL or
// key=value DSN; pgx parses it fully when the store opens.
func looksLikePostgresURL(u string) bool {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		return true
	}
	k, _, ok := strings.Cut(strings.Fields(u + " x")[0], "=")
	return ok && k != "" && !strings.ContainsAny(k, ":/")
}
