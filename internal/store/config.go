package store

import "time"

// Backend names for Config.Backend.
const (
	BackendBolt     = "bolt"
	BackendRedis    = "redis"
	BackendMemory   = "memory"
	BackendPostgres = "postgres"
)

// Defaults WithDefaults (and so backend.Open) applies to zero Config
// fields. Each names the field it fills.
const (
	DefaultBackend           = BackendBolt      // Backend
	DefaultPath              = "osb-gateway.db" // Path
	DefaultOpenTimeout       = 5 * time.Second  // OpenTimeout
	DefaultRedisAddr         = "127.0.0.1:6379" // Redis.Addrs
	DefaultRedisKeyPrefix    = "osb-gateway:"   // Redis.KeyPrefix
	DefaultRedisDialTimeout  = 2 * time.Second  // Redis.DialTimeout
	DefaultRedisReadTimeout  = 1 * time.Second  // Redis.ReadTimeout
	DefaultRedisWriteTimeout = 1 * time.Second  // Redis.WriteTimeout
	// DefaultRedisReplicaAckTimeout is Redis.ReplicaAckTimeout.
	DefaultRedisReplicaAckTimeout = 1 * time.Second

	DefaultPostgresMaxConns         = 10              // Postgres.MaxConns
	DefaultPostgresStatementTimeout = 5 * time.Second // Postgres.StatementTimeout
	DefaultPostgresConnectTimeout   = 5 * time.Second // Postgres.ConnectTimeout
)

// RedisTTLMargin is added to the time left to a lock's Deadline to make the
// TTL of its Redis key. The stored Deadline decides expiry; the margin leaves
// ExpireDue time to report an expired lock before Redis drops it, and covers
// clock differences between replicas.
const RedisTTLMargin = time.Minute

// Config chooses and configures a backend. The zero value is a bolt file
// named DefaultPath in the working directory.
type Config struct {
	// Backend is BackendBolt, BackendRedis, BackendPostgres or BackendMemory; zero value:
	// DefaultBackend.
	Backend string
	// Path is the bolt file, created if missing; zero value: DefaultPath.
	Path string
	// OpenTimeout is how long opening waits for another process to let go of
	// the bolt file before failing; zero value: DefaultOpenTimeout.
	OpenTimeout time.Duration
	// Redis configures the redis backend.
	Redis RedisConfig
	// Postgres configures the postgres backend.
	Postgres PostgresConfig
}

// PostgresConfig reaches PostgreSQL through pgx's connection pool.
type PostgresConfig struct {
	// URL is a libpq connection URL or key=value DSN, password included
	// (a secret: never logged). Several hosts with
	// target_session_attrs=read-write follow a failover to the new
	// primary. Required.
	URL string
	// MaxConns caps the pool's connections; zero value:
	// DefaultPostgresMaxConns.
	MaxConns int32
	// StatementTimeout is the server's statement_timeout for the store's
	// connections, and with ConnectTimeout bounds each call; zero value:
	// DefaultPostgresStatementTimeout.
	StatementTimeout time.Duration
	// ConnectTimeout bounds connecting to one host; zero value:
	// DefaultPostgresConnectTimeout (a connect_timeout in URL wins).
	ConnectTimeout time.Duration
}

// RedisConfig reaches Redis through go-redis' universal client: one address
// is a standalone server, MasterName selects Sentinel (Addrs are then the
// sentinels), and several addresses without MasterName are a Cluster.
type RedisConfig struct {
	// Addrs are host:port addresses; zero value: DefaultRedisAddr.
	Addrs []string
	// Username and Password authenticate (ACL user, or password alone);
	// empty means no AUTH.
	Username, Password string
	// DB is the database number (standalone and Sentinel only).
	DB int
	// MasterName is the Sentinel master name; empty means no Sentinel.
	MasterName string
	// KeyPrefix starts every key the store writes; zero value:
	// DefaultRedisKeyPrefix. Replicas sharing state use the same prefix.
	// A prefix holding a Cluster hash tag, like "{osb-gateway}:", keeps
	// every key in one slot.
	KeyPrefix string
	// DialTimeout bounds connecting; zero value: DefaultRedisDialTimeout.
	DialTimeout time.Duration
	// ReadTimeout bounds waiting for a reply; zero value:
	// DefaultRedisReadTimeout.
	ReadTimeout time.Duration
	// WriteTimeout bounds sending a command; zero value:
	// DefaultRedisWriteTimeout.
	WriteTimeout time.Duration
	// TLS connects with TLS 1.2 or later, verifying the server against the
	// system roots.
	TLS bool
	// ReplicaAcks, when above zero, makes every write a promise rests on
	// (a lock's acquire and update, an inventory record, an orphan) wait
	// on its connection (WAIT) until that many replicas acknowledged it; a
	// write not acknowledged within ReplicaAckTimeout is ErrUnavailable,
	// as if the store had not answered. Zero value: no wait (replication
	// stays asynchronous). Standalone and Sentinel only.
	ReplicaAcks int
	// ReplicaAckTimeout bounds each wait for ReplicaAcks; zero value:
	// DefaultRedisReplicaAckTimeout.
	ReplicaAckTimeout time.Duration
}

// WithDefaults returns c with its zero fields set to their defaults (the
// Default constants above).
func (c Config) WithDefaults() Config {
	if c.Backend == "" {
		c.Backend = DefaultBackend
	}
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = DefaultOpenTimeout
	}
	r := &c.Redis
	if len(r.Addrs) == 0 {
		r.Addrs = []string{DefaultRedisAddr}
	}
	if r.KeyPrefix == "" {
		r.KeyPrefix = DefaultRedisKeyPrefix
	}
	if r.DialTimeout == 0 {
		r.DialTimeout = DefaultRedisDialTimeout
	}
	if r.ReadTimeout == 0 {
		r.ReadTimeout = DefaultRedisReadTimeout
	}
	if r.WriteTimeout == 0 {
		r.WriteTimeout = DefaultRedisWriteTimeout
	}
	if r.ReplicaAckTimeout == 0 {
		r.ReplicaAckTimeout = DefaultRedisReplicaAckTimeout
	}
	p := &c.Postgres
	if p.MaxConns == 0 {
		p.MaxConns = DefaultPostgresMaxConns
	}
	if p.StatementTimeout == 0 {
		p.StatementTimeout = DefaultPostgresStatementTimeout
	}
	if p.ConnectTimeout == 0 {
		p.ConnectTimeout = DefaultPostgresConnectTimeout
	}
	return c
}
