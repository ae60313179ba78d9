// Package config is the gateway.yaml schema: strict decoding, defaults,
// validation with go-playground/validator/v10 plus cross-field checks, and
// secrets resolved from environment variables or files.
//
// Loading has no side effects: it reads the file (and the secret files it
// names) and returns a *Config or every problem found, each with its YAML
// path. It never opens sockets.
package config

import (
	"time"

	"github.com/osb-gateway/osb-gateway/internal/policy"
)

// Defaults applied by Load before validation. Each names the key it fills.
const (
	DefaultListenAddress     = ":8080"          // listen.address
	DefaultReadHeaderTimeout = 10 * time.Second // listen.read_header_timeout
	DefaultReadTimeout       = 60 * time.Second // listen.read_timeout
	DefaultWriteTimeout      = 90 * time.Second // listen.write_timeout (longer than the broker timeout)
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10 // listen.max_header_bytes
	DefaultMaxBodyBytes      = 1 << 20  // listen.max_body_bytes
	DefaultShutdownGrace     = 30 * time.Second
	// DefaultShutdownDelay is listen.shutdown_delay: how long after SIGTERM
	// the listeners keep accepting while /readyz answers 503, so that load
	// balancers and Kubernetes endpoints stop sending before the drain.
	DefaultShutdownDelay = 5 * time.Second

	DefaultAdminAddress = "127.0.0.1:9090" // admin.address
	DefaultAdminPprof   = false            // admin.pprof

	DefaultLogFormat = "json" // log.format
	DefaultLogLevel  = "info" // log.level

	DefaultAccessFlushInterval = 100 * time.Millisecond // log.access_flush_interval

	DefaultMissingVersionStatus = 412 // tenants[].missing_version_status

	DefaultBrokerTimeout          = 60 * time.Second // brokers[].timeout, as Cloud Controller
	DefaultDialTimeout            = 5 * time.Second
	DefaultTLSHandshakeTimeout    = 10 * time.Second
	DefaultMaxIdleConnsPerBroker  = 256 // brokers[].max_idle_conns
	DefaultIdleConnTimeout        = 90 * time.Second
	DefaultBrokerTransport        = TransportLean // brokers[].transport
	DefaultListenServer           = ServerLean    // listen.server
	DefaultBrokerMinVersionString = "2.0"         // brokers[].api_version.min
	DefaultBrokerMaxVersionString = "2.17"        // brokers[].api_version.max

	DefaultCatalogMaxEntries = 1000     // catalog.max_entries
	DefaultCatalogMaxBytes   = 64 << 20 // catalog.max_bytes
	DefaultCatalogTTL        = 5 * time.Minute

	// DefaultCatalogRetryInterval is brokers[].catalog.retry_interval: how
	// long after a failed catalog fetch the next one may start.
	DefaultCatalogRetryInterval = 5 * time.Second
	// DefaultCatalogRetryMaxInterval is brokers[].catalog.retry_max_interval:
	// the cap of the doubling wait after consecutive failures (raised to
	// retry_interval when that is longer).
	DefaultCatalogRetryMaxInterval = time.Minute
)

// Config is the whole gateway.yaml.
type Config struct {
	Listen  Listen   `yaml:"listen"`
	Admin   Admin    `yaml:"admin"`
	Log     Log      `yaml:"log"`
	Runtime Runtime  `yaml:"runtime"` // runtime.go
	Catalog Catalog  `yaml:"catalog"`
	State   State    `yaml:"state"`
	Tenants []Tenant `yaml:"tenants" validate:"required,min=1,dive"`
	Brokers []Broker `yaml:"brokers" validate:"required,min=1,dive"`

	Auth      Auth      `yaml:"auth"`      // auth.go
	Telemetry Telemetry `yaml:"telemetry"` // telemetry.go
	Audit     Audit     `yaml:"audit"`     // telemetry.go
	Inventory Inventory `yaml:"inventory"` // inventory.go
	Reload    Reload    `yaml:"reload"`    // reload.go
	// Policies apply to every route's calls (policies.go); nil: none.
	Policies []policy.Spec `yaml:"policies"`
}

// Listen is the platform-facing HTTP server.
type Listen struct {
	// Address is host:port; zero value: DefaultListenAddress.
	Address           string        `yaml:"address" validate:"required,hostport"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" validate:"gt=0"`
	ReadTimeout       time.Duration `yaml:"read_timeout" validate:"gt=0"`
	WriteTimeout      time.Duration `yaml:"write_timeout" validate:"gt=0"`
	IdleTimeout       time.Duration `yaml:"idle_timeout" validate:"gt=0"`
	// MaxHeaderBytes caps request headers; zero value: DefaultMaxHeaderBytes.
	MaxHeaderBytes int `yaml:"max_header_bytes" validate:"gte=4096,lte=1048576"`
	// MaxBodyBytes caps a request body; a larger one gets 413.
	MaxBodyBytes  int64         `yaml:"max_body_bytes" validate:"gte=1024,lte=104857600"`
	ShutdownGrace time.Duration `yaml:"shutdown_grace" validate:"gte=0"`
	// ShutdownDelay is how long after SIGTERM or SIGINT the listeners keep
	// accepting (with /readyz answering 503) before the drain of
	// ShutdownGrace begins; 0 drains at once. nil: DefaultShutdownDelay.
	ShutdownDelay *time.Duration `yaml:"shutdown_delay" validate:"omitempty,gte=0,lte=10m"`
	// MaxInFlight caps the platform calls served at once; a call beyond
	// it is answered at once (429 mutating, 503 reads) instead of
	// queueing for a CPU. Zero value: DefaultMaxInFlightPerCPU per
	// GOMAXPROCS, chosen at start (see MaxInFlightFor; limits.go).
	MaxInFlight int `yaml:"max_in_flight" validate:"gte=0,lte=1000000"`
	// TLS is TLS at this listener (see listen_tls.go); zero value: plain HTTP.
	TLS ListenTLS `yaml:"tls"`
	// TrustedProxies are the load balancers and proxies (IP addresses or
	// CIDR prefixes) whose X-Forwarded-For the gateway believes: a request
	// from one of them logs and audits the client address found there as
	// forwarded_for (the rightmost address not itself trusted). Empty:
	// X-Forwarded-For is never believed. It names who called in logs and
	// audit records only; auth's per-address limits stay on the peer.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Server is what serves the plain-HTTP listener: ServerLean (the
	// gateway's own HTTP/1.x server, internal/lean) or ServerStandard
	// (net/http's). A TLS listener is always net/http's (it speaks HTTP/2
	// too). Zero value: DefaultListenServer.
	Server string `yaml:"server" validate:"oneof=lean standard"`
}

const (
	// ServerLean is the gateway's own HTTP/1.x server (lean.Server).
	ServerLean = "lean"
	// ServerStandard is net/http's server.
	ServerStandard = "standard"
)

// Admin is the operator-facing listener: health, readiness, later metrics.
type Admin struct {
	// Address is host:port; zero value: DefaultAdminAddress (loopback).
	// "off" disables the admin listener.
	Address string `yaml:"address" validate:"required,hostport_or_off"`
	// Token is the bearer token every control route under /admin/
	// requires; empty: they answer 403. TokenFile reads it from a file
	// instead.
	Token     Secret `yaml:"token"`
	TokenFile string `yaml:"token_file"`
	// Pprof serves Go's runtime profiles under /admin/debug/pprof/ (behind
	// the token, like every /admin/ route); zero value: DefaultAdminPprof.
	Pprof bool `yaml:"pprof"`
}

// Log configures log/slog.
type Log struct {
	Format string `yaml:"format" validate:"oneof=json text"`
	Level  string `yaml:"level" validate:"oneof=debug info warn error"`
	// AccessFlushInterval is how long access lines may wait in a buffer
	// (at most accessBufferSize bytes) before they are written, so that a
	// busy gateway writes its access log in one system call per interval
	// instead of one per request; 0 writes every line at once. nil:
	// DefaultAccessFlushInterval.
	AccessFlushInterval *time.Duration `yaml:"access_flush_interval" validate:"omitempty,gte=0,lte=10s"`
}

// Catalog sizes the catalog cache, shared by all brokers. Catalogs are
// cached per broker, negotiated API version and (for brokers with
// catalog.vary_by_platform) originating platform.
type Catalog struct {
	// MaxEntries bounds the number of cached catalogs; zero value:
	// DefaultCatalogMaxEntries.
	MaxEntries int `yaml:"max_entries" validate:"gte=1,lte=1000000"`
	// MaxBytes bounds the cached catalogs' total size; the least recently
	// used are dropped first. Zero value: DefaultCatalogMaxBytes.
	MaxBytes int64 `yaml:"max_bytes" validate:"gte=1024"`
	// Warm fetches every broker's catalog at start and after a reload.
	Warm bool `yaml:"warm"`
	// RequireWarm makes /readyz answer 503 until every broker's catalog was
	// fetched once (implies Warm).
	RequireWarm bool `yaml:"require_warm"`
	// OnDrift is what a fetched catalog that drifted from the broker's
	// accepted one (a plan or service removed, or made unbindable or not
	// updatable, under live instances; an id changed under a name; a schema
	// the stored parameters no longer pass) does: OnDriftServe serves it
	// and reports the drift, OnDriftHold keeps serving the accepted catalog
	// until an operator accepts the new one. Zero value: DefaultOnDrift.
	OnDrift string `yaml:"on_drift" validate:"oneof=serve hold"`
}

// Values of catalog.on_drift and brokers[].catalog.on_drift.
const (
	// OnDriftServe serves a catalog that drifted and reports the drift.
	OnDriftServe = "serve"
	// OnDriftHold keeps serving the last accepted catalog (the last one
	// that stranded nothing) until an operator accepts the new one.
	OnDriftHold = "hold"
	// DefaultOnDrift is catalog.on_drift's default.
	DefaultOnDrift = OnDriftServe
)

// Tenant is one platform (for example one Cloud Foundry foundation).
type Tenant struct {
	Name        string       `yaml:"name" validate:"required,max=63"`
	Credentials []Credential `yaml:"credentials" validate:"required,min=1,dive"`
	// MissingVersionStatus is the status for a missing X-Broker-API-Version:
	// 412 (default) or 400 (allowed since OSB 2.16).
	MissingVersionStatus int     `yaml:"missing_version_status" validate:"oneof=400 412"`
	Routes               []Route `yaml:"routes" validate:"required,min=1,dive"`
	// ClientCert is what a client certificate is worth for this tenant
	// (see listen_tls.go); zero value: nothing.
	ClientCert ClientCert `yaml:"client_cert"`
	// Limits are rate limits on all of the tenant's calls together, on
	// every route (limits.go); nil: none.
	Limits *Limits `yaml:"limits"`
	// Quotas cap the instances the tenant holds on all its brokers
	// (quota.go); nil: none.
	Quotas []Quota `yaml:"quotas" validate:"dive"`
	// Policies apply to the calls on every route of the tenant, after
	// the top-level ones (policies.go); nil: none.
	Policies []policy.Spec `yaml:"policies"`
}

// Credential is one basic-auth username and password a tenant may present.
// Several allow rotation. Password may be plain (resolved from ${ENV} or
// PasswordFile) or a bcrypt hash ("$2a$", "$2b$", "$2y$").
type Credential struct {
	Username     string `yaml:"username" validate:"required"`
	Password     Secret `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
}

// Route gives a tenant access to one broker.
type Route struct {
	Broker string `yaml:"broker" validate:"required"`
	// Prefix is the URL path prefix; zero value: "/<tenant>/<broker>".
	Prefix string `yaml:"prefix"`
	// Services and Plans restrict the tenant's view of the broker's
	// catalog. Empty: everything is visible.
	Services Filter `yaml:"services"`
	Plans    Filter `yaml:"plans"`
	// Limits are rate limits on the tenant's calls to this broker, on top
	// of the tenant's own (limits.go); nil: none.
	Limits *Limits `yaml:"limits"`
	// Quotas cap the instances the tenant holds on this route's broker
	// (quota.go); nil: none.
	Quotas []Quota `yaml:"quotas" validate:"dive"`
	// MigrateTo names a second broker that takes the route's new
	// instances (proxy/internal/routes/migrate.go); empty: none.
	MigrateTo string `yaml:"migrate_to"`
	// IDs rewrites the service and plan ids the route shows, so that one
	// platform can register the broker twice (routeids.go in proxy); nil:
	// the broker's own ids.
	IDs *RouteIDs `yaml:"ids"`
	// Policies apply to the route's calls, after the top-level and the
	// tenant's (policies.go); nil: none.
	Policies []policy.Spec `yaml:"policies"`
}

// Filter selects catalog services or plans by name or id with glob
// patterns (path.Match syntax: *, ?, [a-z]). An item is visible when Allow
// is empty or one of its patterns matches, and no Deny pattern matches.
// Plan patterns match the plan's name, its id, or "<service name>/<plan
// name>".
type Filter struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

// Empty reports whether f lets everything through.
func (f Filter) Empty() bool { return len(f.Allow) == 0 && len(f.Deny) == 0 }
