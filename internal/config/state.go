package config

import "time"

// Defaults of the state section and of per-broker guard settings.
const (
	DefaultStateBackend      = "bolt"           // state.backend
	DefaultStatePath         = "osb-gateway.db" // state.path
	DefaultRedisKeyPrefix    = "osb-gateway:"   // state.redis.key_prefix
	DefaultOperationDeadline = 7 * 24 * time.Hour
	DefaultSweepInterval     = time.Minute     // state.sweep_interval
	DefaultWatchAfter        = 5 * time.Minute // state.watch_after
	DefaultConcurrencyError  = "blocking"      // brokers[].concurrency_error
	DefaultOrphanMitigation  = "report"        // brokers[].orphan_mitigation
	DefaultOrphanSchedule    = "10s,1m,5m,15m,1h,4h"
	DefaultLockGranularity   = "binding" // brokers[].lock_granularity
)

// State is where the gateway keeps operation locks and the orphan queue.
type State struct {
	// Backend is "bolt" (an embedded file: survives restarts of one
	// process), "redis" (shared by replicas) or "memory" (lost at exit; for
	// tests and throwaway runs). Zero value: DefaultStateBackend.
	Backend string `yaml:"backend" validate:"oneof=bolt redis memory"`
	// Path is the bolt file; zero value: DefaultStatePath. A relative path
	// is relative to the configuration file's directory, as every other
	// path in the file (Load resolves it).
	Path  string     `yaml:"path"`
	Redis StateRedis `yaml:"redis"`
	// OperationDeadline is how long an asynchronous operation may hold its
	// instance when the plan has no maximum_polling_duration; then the lock
	// is released and the expiry logged. Zero value: 7 days, as Cloud
	// Controller.
	OperationDeadline time.Duration `yaml:"operation_deadline" validate:"gt=0"`
	// SweepInterval is how often expired locks are released and logged even
	// if nobody polls. Zero value: DefaultSweepInterval.
	SweepInterval time.Duration `yaml:"sweep_interval" validate:"gt=0"`
	// WatchAfter is the age past which the gateway polls an asynchronous
	// operation's last_operation itself, at each sweep, and settles it
	// (inventory, lock) when the broker says it ended: a platform that lost
	// the 202 or stopped polling would otherwise leave its instance blocked
	// until the operation's deadline. An operation still in progress is
	// polled again after another WatchAfter. A value beyond every deadline
	// (operation_deadline, the plans' maximum_polling_duration) turns the
	// watch off. Zero value: DefaultWatchAfter.
	WatchAfter time.Duration `yaml:"watch_after" validate:"gt=0"`
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
	setDuration(&s.OperationDeadline, DefaultOperationDeadline)
	setDuration(&s.SweepInterval, DefaultSweepInterval)
	setDuration(&s.WatchAfter, DefaultWatchAfter)
}

// checkState reports cross-field problems of the state section.
func checkState(c *Config, probs *Problems) {
	if c.State.Backend == "redis" {
		if len(c.State.Redis.Addrs) == 0 {
			probs.addf("state.redis.addrs", "is required with backend redis")
		}
		for i, a := range c.State.Redis.Addrs {
			if msg := checkHostPort(a); msg != "" {
				probs.addf(joinIndex("state.redis.addrs", i), "must be host:port (%s)", msg)
			}
		}
	}
}
