package config

import (
	"time"
)

// Defaults of the inventory and of the per-broker emulation settings.
const (
	// DefaultExpiryWarning is inventory.expiry_warning: bindings whose
	// expires_at falls within it are listed and counted as expiring.
	DefaultExpiryWarning = 7 * 24 * time.Hour
	// DefaultUsageRetention is inventory.usage_retention: how long the
	// usage records of deleted instances and bindings are kept.
	DefaultUsageRetention = 400 * 24 * time.Hour
	// DefaultInventorySecrets is brokers[].inventory.secrets.
	DefaultInventorySecrets = SecretsNone
	// DefaultPollMaxInterval caps brokers[].poll.min_interval when it
	// comes from a broker's Retry-After.
	DefaultPollMaxInterval = time.Minute
)

// What the inventory keeps of parameters and credentials
// (brokers[].inventory.secrets).
const (
	// SecretsNone never stores parameters or credentials.
	SecretsNone = "none"
	// SecretsEncrypted stores them sealed with AES-256-GCM under the keys
	// of inventory.key_file.
	SecretsEncrypted = "encrypted"
)

// Inventory is the top-level inventory section: what applies to every
// broker's inventory.
type Inventory struct {
	// KeyFile holds the keys that seal stored parameters and credentials:
	// one base64 key of 32 bytes per line, the first seals, all open
	// (rotation: put a new key first). Relative to the config file.
	// Required when a broker sets inventory.secrets: encrypted.
	KeyFile string `yaml:"key_file"`
	// ExpiryWarning is how far ahead a binding's expires_at counts as
	// expiring (admin list and metric). Zero value: DefaultExpiryWarning.
	ExpiryWarning time.Duration `yaml:"expiry_warning" validate:"gt=0"`
	// UsageRetention is how long the usage report keeps what it needs of
	// deleted instances and bindings (and of plans an instance left): the
	// records whose end is older are purged at a sweep. A report reaching
	// further back misses them. Zero value: DefaultUsageRetention.
	UsageRetention time.Duration `yaml:"usage_retention" validate:"gt=0"`
}

// BrokerInventory is what the gateway keeps of one broker's instances and
// bindings.
type BrokerInventory struct {
	// Disabled turns the broker's inventory off: nothing is recorded, and
	// no emulation that needs it may be on.
	Disabled bool `yaml:"disabled"`
	// Secrets is SecretsNone or SecretsEncrypted (needs
	// inventory.key_file). Zero value: DefaultInventorySecrets.
	Secrets string `yaml:"secrets" validate:"oneof=none encrypted"`
}

// Emulate turns on what the gateway answers for a broker that cannot.
// Every field's zero value is off.
type Emulate struct {
	// Fetch answers GET instance and GET binding from the inventory when
	// the broker cannot (below 2.14, or instances_retrievable /
	// bindings_retrievable false in its catalog).
	Fetch bool `yaml:"fetch"`
	// Advertise sets instances_retrievable and bindings_retrievable in the
	// catalog the platforms see, so they offer the feature; needs Fetch.
	Advertise bool `yaml:"advertise"`
	// AsyncAfter, when set, answers 202 with an operation the gateway
	// owns to a platform that sent accepts_incomplete=true once a
	// synchronous broker has not answered a provision, update,
	// deprovision, bind or unbind for this long; the broker call runs on
	// to brokers[].timeout and the gateway answers the polls. Must be
	// shorter than timeout.
	AsyncAfter time.Duration `yaml:"async_after" validate:"gte=0"`
	// Idempotent answers a repeat of a call that succeeded as the
	// specification says (200 and the recorded body; 409 for a conflicting
	// repeat) without reaching the broker.
	Idempotent bool `yaml:"idempotent"`
	// Gone answers 410 to a deprovision or unbind of what the inventory
	// never saw, without reaching the broker: only for a broker whose every
	// instance is in the inventory (after inventory import, or behind the
	// gateway from its first day).
	Gone bool `yaml:"gone"`
	// SyncWithin, when set, serves a platform that did not send
	// accepts_incomplete=true and got 422 AsyncRequired: the gateway
	// repeats the call with the flag, polls the broker itself and answers
	// within this bound. Must not exceed listen.write_timeout.
	SyncWithin time.Duration `yaml:"sync_within" validate:"gte=0"`
}

// Poll is how the gateway treats last_operation polls to one broker.
// Concurrent polls of one operation the gateway tracks always share one
// broker call.
type Poll struct {
	// RetryAfter, when set, is the Retry-After added to a 200
	// last_operation answer that has none (rounded up to whole seconds).
	RetryAfter time.Duration `yaml:"retry_after" validate:"gte=0,lte=24h"`
	// MinInterval is how long an "in progress" answer is reused for polls
	// of the same operation; zero value: the answer's Retry-After (the
	// broker's, or RetryAfter), at most DefaultPollMaxInterval, and no
	// reuse for an answer without one; a negative value turns the reuse
	// off.
	MinInterval time.Duration `yaml:"min_interval" validate:"lte=24h"`
}

func (b *Broker) applyInventoryDefaults() {
	if b.Inventory.Secrets == "" {
		b.Inventory.Secrets = DefaultInventorySecrets
	}
}

// checkInventory checks what spans the inventory and emulation settings.
func checkInventory(c *Config, probs *Problems) {
	for i := range c.Brokers {
		b := &c.Brokers[i]
		path := joinIndex("brokers", i)
		if b.Inventory.Secrets == SecretsEncrypted && c.Inventory.KeyFile == "" {
			probs.addf(path+".inventory.secrets", "is encrypted, which needs inventory.key_file (the keys that seal parameters and credentials)")
		}
		if b.Inventory.Disabled {
			for _, on := range []struct {
				key string
				set bool
			}{{"fetch", b.Emulate.Fetch}, {"async_after", b.Emulate.AsyncAfter > 0}, {"idempotent", b.Emulate.Idempotent}, {"gone", b.Emulate.Gone}} {
				if on.set {
					probs.addf(path+".emulate."+on.key, "needs the broker's inventory, which inventory.disabled turns off")
				}
			}
		}
		if b.Emulate.Advertise && !b.Emulate.Fetch {
			probs.addf(path+".emulate.advertise", "needs emulate.fetch: the gateway would advertise GET instance and binding without serving them")
		}
		if a := b.Emulate.AsyncAfter; a > 0 && a >= b.Timeout {
			probs.addf(path+".emulate.async_after", "is %s, which must be shorter than timeout (%s): the broker call runs on to timeout after the platform got its 202", a, b.Timeout)
		}
		if s := b.Emulate.SyncWithin; s > 0 && c.Listen.WriteTimeout > 0 && s >= c.Listen.WriteTimeout {
			probs.addf(path+".emulate.sync_within", "is %s, which must be shorter than listen.write_timeout (%s), or the answer could not be written", s, c.Listen.WriteTimeout)
		}
	}
}
