package config

// A broker's section (brokers[]): where it is, how it is called, what of its
// answers is checked, its catalog, API versions and TLS.

import (
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Broker is one upstream OSB broker.
type Broker struct {
	Name         string `yaml:"name" validate:"required,max=63"`
	URL          string `yaml:"url" validate:"required"`
	Username     string `yaml:"username"`
	Password     Secret `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	// NextUsername, NextPassword and NextPasswordFile are a second
	// credential for a rotation without a window: the gateway sends the
	// one that last worked and, on a 401, retries the call once with the
	// other (brokerauth.go in proxy). NextUsername defaults to Username.
	NextUsername     string `yaml:"next_username"`
	NextPassword     Secret `yaml:"next_password"`
	NextPasswordFile string `yaml:"next_password_file"`
	// Auth is how the gateway authenticates to the broker beyond basic
	// auth (bearer token, OAuth2 client credentials); nil: basic with
	// Username and Password, as without it.
	Auth *BrokerAuth `yaml:"auth"`
	// APIVersion is the range of X-Broker-API-Version the broker accepts.
	APIVersion VersionRange `yaml:"api_version"`
	// Timeout bounds a whole broker call; zero value: DefaultBrokerTimeout.
	Timeout             time.Duration `yaml:"timeout" validate:"gt=0,lte=1h"`
	DialTimeout         time.Duration `yaml:"dial_timeout" validate:"gt=0"`
	TLSHandshakeTimeout time.Duration `yaml:"tls_handshake_timeout" validate:"gt=0"`
	// ResponseHeaderTimeout; zero value: Timeout.
	ResponseHeaderTimeout time.Duration `yaml:"response_header_timeout" validate:"gte=0"`
	MaxIdleConns          int           `yaml:"max_idle_conns" validate:"gte=1,lte=100000"`
	IdleConnTimeout       time.Duration `yaml:"idle_conn_timeout" validate:"gt=0"`
	// Transport is what carries calls to the broker: TransportStandard
	// (net/http's http.Transport, HTTP/2 where the broker offers it) or
	// TransportLean (HTTP/1.1 only, the calling goroutine writes the
	// request and reads the answer itself). Zero value:
	// DefaultBrokerTransport.
	Transport  string        `yaml:"transport" validate:"oneof=standard lean"`
	TLS        UpstreamTLS   `yaml:"tls"`
	Catalog    BrokerCatalog `yaml:"catalog"`
	Validation Validation    `yaml:"validation"`
	// ConcurrencyError is what a call blocked by an operation in progress
	// gets: "blocking" (400 "Another operation for this service instance is
	// in progress.", Cloud Controller's contract) or "spec" (422
	// ConcurrencyError for platforms at 2.14 or later, 400 below). Zero
	// value: DefaultConcurrencyError.
	ConcurrencyError string `yaml:"concurrency_error" validate:"oneof=blocking spec"`
	// AllowDeleteDuringCreate lets a deprovision through while an
	// asynchronous provision of the instance is in progress (Cloud
	// Controller's way to cancel a create).
	AllowDeleteDuringCreate bool `yaml:"allow_delete_during_create"`
	// OrphanMitigation is what the gateway does when a provision or bind
	// may have left something behind (5xx, timeout, an unexpected 2xx, a
	// malformed 201/202): "off", "report" (record and log a candidate) or
	// "mitigate" (also send the deprovision or unbind in the background,
	// retrying on OrphanSchedule). Zero value: DefaultOrphanMitigation.
	OrphanMitigation string `yaml:"orphan_mitigation" validate:"oneof=off report mitigate"`
	// OrphanSchedule is the comma-separated delays between mitigation
	// attempts; after the last, the gateway gives up and reports. Zero
	// value: DefaultOrphanSchedule.
	OrphanSchedule string `yaml:"orphan_schedule"`
	// LockGranularity is what an operation in progress locks, as Cloud
	// Controller does: "binding" (an instance operation blocks the instance
	// and its bindings; a binding operation blocks that binding and the
	// instance's update and deprovision; different bindings of one instance
	// proceed side by side) or "instance" (every operation locks the whole
	// instance: for brokers that cannot take concurrent binds). Zero value:
	// DefaultLockGranularity.
	LockGranularity string `yaml:"lock_granularity" validate:"oneof=binding instance"`
	// HoldAfterTimeout is how long the instance (or binding) stays locked
	// after the gateway gave up on a broker call at Timeout, or after a
	// call got no answer once its request went out (a reset, a connection
	// closed before the answer): the broker may have done it or still be
	// working on it, and a retry must not overlap it. With
	// orphan_mitigation: mitigate, the undo of such a provision or bind is
	// sent when the hold ends, under the same lock. Zero value: Timeout.
	HoldAfterTimeout time.Duration `yaml:"hold_after_timeout" validate:"gt=0,lte=24h"`
	// Inventory is what the gateway keeps of the broker's instances and
	// bindings; Emulate what it answers for the broker; Poll how it treats
	// last_operation polls (inventory.go).
	Inventory BrokerInventory `yaml:"inventory"`
	Emulate   Emulate         `yaml:"emulate"`
	Poll      Poll            `yaml:"poll"`
	// MaxInFlight caps the calls in flight to the broker; 0: no cap.
	// QueueTimeout is how long a call over the cap waits for a slot, in
	// FIFO order per tenant and round-robin across tenants; nil (with a
	// cap): DefaultQueueTimeout; 0: no waiting. Breaker is the broker's
	// circuit breaker; nil: none. See protect.go.
	MaxInFlight  int            `yaml:"max_in_flight" validate:"gte=0,lte=100000"`
	QueueTimeout *time.Duration `yaml:"queue_timeout" validate:"omitempty,gte=0,lte=10m"`
	Breaker      *Breaker       `yaml:"breaker"`
	// Retired retires the broker: `true` or `{answer: gone}` (retired.go).
	Retired Retired `yaml:"retired"`
}

// Broker transports (brokers[].transport).
const (
	// TransportStandard is net/http's http.Transport.
	TransportStandard = "standard"
	// TransportLean is the gateway's own HTTP/1.1 transport (internal/lean).
	TransportLean = "lean"
)

// Validation modes, for requests and responses separately.
const (
	// ModeEnforce refuses what breaks a rule: an invalid request never
	// reaches the broker (400/412/422), an invalid broker response becomes
	// a 502 naming the rule and the broker.
	ModeEnforce = "enforce"
	// ModeReport forwards unchanged and records and logs each finding.
	ModeReport = "report"
	// ModeOff checks nothing.
	ModeOff = "off"

	DefaultRequestMode  = ModeEnforce // brokers[].validation.requests
	DefaultResponseMode = ModeReport  // brokers[].validation.responses
)

// What a call that needs the broker's catalog gets when no catalog can be
// had (brokers[].validation.without_catalog).
const (
	// WithoutCatalogRefuse answers 503 naming the broker and the cause; the
	// call is not forwarded.
	WithoutCatalogRefuse = "refuse"
	// WithoutCatalogForward checks what can be checked without the catalog,
	// records that the rest was not, and forwards.
	WithoutCatalogForward = "forward"

	DefaultWithoutCatalog = WithoutCatalogRefuse // brokers[].validation.without_catalog
)

// Validation says how the OSB rules are applied to one broker's traffic.
type Validation struct {
	// Requests is the mode for platform requests; zero value:
	// DefaultRequestMode.
	Requests string `yaml:"requests" validate:"oneof=enforce report off"`
	// Responses is the mode for broker responses; zero value:
	// DefaultResponseMode.
	Responses string `yaml:"responses" validate:"oneof=enforce report off"`
	// WithoutCatalog is what a provision, update or bind gets when Requests
	// is not off and the broker's catalog cannot be had (none cached, the
	// fetch failed): WithoutCatalogRefuse or WithoutCatalogForward. Routes
	// with services or plans filters refuse every mutating call without a
	// catalog, whatever this says. Zero value: DefaultWithoutCatalog.
	WithoutCatalog string `yaml:"without_catalog" validate:"oneof=forward refuse"`
}

// BrokerCatalog is how one broker's catalog is cached.
type BrokerCatalog struct {
	// TTL is how long a fetched catalog is fresh; after it, the stale one is
	// served while one background refresh runs. Zero value:
	// DefaultCatalogTTL.
	TTL time.Duration `yaml:"ttl" validate:"gt=0"`
	// VaryByPlatform caches a catalog per originating platform (the first
	// word of X-Broker-API-Originating-Identity), for brokers whose catalog
	// differs by platform.
	VaryByPlatform bool `yaml:"vary_by_platform"`
	// RetryInterval is how long after a failed fetch the next fetch of the
	// same catalog may start; calls in between get the remembered failure
	// at once. Each further consecutive failure doubles the wait, up to
	// RetryMaxInterval. Zero value: DefaultCatalogRetryInterval.
	RetryInterval time.Duration `yaml:"retry_interval" validate:"gt=0,lte=1h"`
	// RetryMaxInterval caps the doubled wait. Zero value:
	// DefaultCatalogRetryMaxInterval, or RetryInterval when that is longer.
	RetryMaxInterval time.Duration `yaml:"retry_max_interval" validate:"gt=0,lte=24h"`
	// OnDrift overrides catalog.on_drift for this broker: OnDriftServe or
	// OnDriftHold. Zero value: catalog.on_drift.
	OnDrift string `yaml:"on_drift" validate:"omitempty,oneof=serve hold"`
}

// DriftMode is what a drifted catalog of b does: its own on_drift, else
// the catalog section's (see Catalog.OnDrift).
func (c *Config) DriftMode(b *Broker) string {
	if b.Catalog.OnDrift != "" {
		return b.Catalog.OnDrift
	}
	if c.Catalog.OnDrift != "" {
		return c.Catalog.OnDrift
	}
	return DefaultOnDrift
}

// VersionRange bounds the API versions a broker accepts. The header sent to
// the broker is the platform's, capped at Max.
type VersionRange struct {
	Min osb.Version `yaml:"min"`
	Max osb.Version `yaml:"max"`
}

// UpstreamTLS is how the gateway talks TLS to a broker.
type UpstreamTLS struct {
	// CAFile is a PEM bundle of roots; empty: the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a client certificate for mTLS; both or none.
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
	// MinVersion is the lowest TLS version spoken to the broker: "1.2" or
	// "1.3". Zero value: DefaultTLSMinVersion.
	MinVersion string `yaml:"min_version" validate:"oneof=1.2 1.3"`
	// InsecureSkipVerify accepts any broker certificate; start-up logs a
	// warning while it is set. For tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}
