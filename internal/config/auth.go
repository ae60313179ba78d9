package config

import "time"

// Defaults of the auth section. Each names the key it fills.
const (
	// DefaultFailureRate is auth.failures.rate: refused credentials per
	// second one client address may keep up, once its burst is spent.
	DefaultFailureRate = 1.0
	// DefaultFailureBurst is auth.failures.burst: refused credentials one
	// client address may have in a row before the rate applies.
	DefaultFailureBurst = 10
	// DefaultFailureMaxAddresses is auth.failures.max_addresses: client
	// addresses whose failures are tracked, the least recently failing
	// forgotten first.
	DefaultFailureMaxAddresses = 10000
	// DefaultFailureCacheTTL is auth.failure_cache_ttl: how long a refused
	// username and password are answered 401 without bcrypt again.
	DefaultFailureCacheTTL = time.Minute
	// DefaultBcryptQueuePerSlot sizes auth.bcrypt_queue: this many checks
	// may wait per bcrypt slot. A check of the default cost takes some 50
	// to 80 ms of a core, so the last of a full queue waits about a second.
	DefaultBcryptQueuePerSlot = 16
)

// Auth bounds what checking platforms' credentials may cost the gateway: a
// bcrypt comparison takes tens of milliseconds of CPU, so wrong passwords
// must not be free to send.
type Auth struct {
	// BcryptConcurrency is how many bcrypt comparisons run at once; further
	// ones wait in the queue (BcryptQueue). Zero value: max(1,
	// GOMAXPROCS/2), chosen at start (see BcryptSlots).
	BcryptConcurrency int `yaml:"bcrypt_concurrency" validate:"gte=0,lte=1024"`
	// BcryptQueue is how many checks may wait for a bcrypt slot, for as
	// long as their request lasts; one more gets 429 with Retry-After
	// without its credentials being checked. Checks of one username and
	// password share one comparison and one place. Zero value:
	// DefaultBcryptQueuePerSlot per slot (see BcryptWaiters).
	BcryptQueue int `yaml:"bcrypt_queue" validate:"gte=0,lte=100000"`
	// Failures limits refused credentials per client address (the
	// connection's remote IP; an IPv6 client's /64).
	Failures AuthFailures `yaml:"failures"`
	// FailureCacheTTL is how long a refused username and password (kept as
	// a SHA-256 digest, never in clear) are refused again without bcrypt.
	// Zero value: DefaultFailureCacheTTL.
	FailureCacheTTL time.Duration `yaml:"failure_cache_ttl" validate:"gt=0,lte=1h"`
}

// AuthFailures is a token bucket of refused credentials per client
// address: Burst at once, then Rate per second. An address over it gets
// 429 without its credentials being checked.
type AuthFailures struct {
	// Rate is refused credentials per second; zero value:
	// DefaultFailureRate.
	Rate float64 `yaml:"rate" validate:"gt=0,lte=1000"`
	// Burst; zero value: DefaultFailureBurst.
	Burst int `yaml:"burst" validate:"gte=1,lte=100000"`
	// MaxAddresses bounds the addresses tracked; zero value:
	// DefaultFailureMaxAddresses.
	MaxAddresses int `yaml:"max_addresses" validate:"gte=1,lte=10000000"`
}

// BcryptSlots is the number of bcrypt comparisons that may run at once:
// BcryptConcurrency, or max(1, gomaxprocs/2) when it is zero, so that
// wrong passwords can never take more than half of the cores.
func (a Auth) BcryptSlots(gomaxprocs int) int {
	if a.BcryptConcurrency > 0 {
		return a.BcryptConcurrency
	}
	return max(1, gomaxprocs/2)
}

// BcryptWaiters is the number of checks that may wait for one of slots
// bcrypt slots: BcryptQueue, or DefaultBcryptQueuePerSlot per slot when it
// is zero.
func (a Auth) BcryptWaiters(slots int) int {
	if a.BcryptQueue > 0 {
		return a.BcryptQueue
	}
	return DefaultBcryptQueuePerSlot * max(1, slots)
}

func (a *Auth) applyDefaults() {
	setDuration(&a.FailureCacheTTL, DefaultFailureCacheTTL)
	if a.Failures.Rate == 0 {
		a.Failures.Rate = DefaultFailureRate
	}
	if a.Failures.Burst == 0 {
		a.Failures.Burst = DefaultFailureBurst
	}
	if a.Failures.MaxAddresses == 0 {
		a.Failures.MaxAddresses = DefaultFailureMaxAddresses
	}
}
