package config

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// TestLoadFull checks every key of testdata/good/full.yaml lands in its
// field, with defaults filling only what the file leaves out.
func TestLoadFull(t *testing.T) {
	got, err := Load("testdata/good/full.yaml", WithLookupEnv(lookupTestEnv))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Listen: Listen{
			Address:           "[::1]:8443",
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      3 * time.Minute,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    32768,
			MaxBodyBytes:      2097152,
			ShutdownGrace:     10 * time.Second,
			ShutdownDelay:     ptr(time.Duration(0)),
			TLS:               defaultListenTLS,
			Server:            ServerStandard,
		},
		Admin:     Admin{Address: "off", Token: "an-admin-token-of-some-length"},
		Log:       Log{Format: "text", Level: "debug", AccessFlushInterval: ptr(250 * time.Millisecond)},
		Runtime:   Runtime{HeapFloor: "128MiB", GCPercent: 200, MemoryLimit: "512MiB"},
		Catalog:   Catalog{MaxEntries: 100, MaxBytes: 8 << 20, Warm: true, OnDrift: OnDriftHold},
		Telemetry: defaultTelemetry(), Audit: defaultAudit(),
		Auth:      Auth{BcryptConcurrency: 3, BcryptQueue: 12, Failures: AuthFailures{Rate: 0.5, Burst: 4, MaxAddresses: 500}, FailureCacheTTL: 30 * time.Second},
		Inventory: Inventory{ExpiryWarning: DefaultExpiryWarning, UsageRetention: DefaultUsageRetention},
		Reload:    Reload{Watch: ptr(false), Debounce: 2 * time.Second},
		State: State{Backend: "redis", Path: filepath.Join("testdata/good", DefaultStatePath), OperationDeadline: 48 * time.Hour, SweepInterval: 30 * time.Second, Reconcile: StateReconcile{Enabled: ptr(true), After: DefaultReconcileAfter, Every: DefaultReconcileEvery},
			Redis:    StateRedis{Addrs: []string{"127.0.0.1:6379", "127.0.0.1:6380"}, Password: "redis-password", KeyPrefix: "{osb}:", DialTimeout: time.Second},
			Postgres: StatePostgres{MaxConns: DefaultPostgresMaxConns, StatementTimeout: DefaultPostgresStatementTimeout, ConnectTimeout: DefaultPostgresConnectTimeout}},
		Tenants: []Tenant{{
			Name:                 "cf-prod",
			MissingVersionStatus: 400,
			Credentials: []Credential{
				{Username: "cc", Password: "current-password"},
				{Username: "cc", Password: "next-password"},
			},
			Routes: []Route{{Broker: "mysql", Prefix: "/prod/mysql",
				Services: Filter{Allow: []string{"mysql*"}}, Plans: Filter{Deny: []string{"*-large", "mysql/legacy-?"}}},
				{Broker: "legacy", Prefix: "/cf-prod/legacy"}},
			ClientCert: ClientCert{Mode: DefaultClientCertMode},
		}, {
			Name:                 "cf-dev",
			MissingVersionStatus: DefaultMissingVersionStatus,
			Credentials:          []Credential{{Username: "cc-dev", Password: "dev-password"}},
			Routes:               []Route{{Broker: "mysql", Prefix: "/dev/mysql"}},
			ClientCert:           ClientCert{Mode: DefaultClientCertMode},
		}},
		Brokers: []Broker{{
			Name:                  "mysql",
			URL:                   "https://mysql-broker.example.com/osb",
			Username:              "gateway",
			Password:              "broker-password",
			APIVersion:            VersionRange{Min: osb.Version{Major: 2, Minor: 10}, Max: osb.Version{Major: 2, Minor: 15}},
			Timeout:               2 * time.Minute,
			DialTimeout:           3 * time.Second,
			TLSHandshakeTimeout:   4 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
			MaxIdleConns:          64,
			IdleConnTimeout:       time.Minute,
			Transport:             TransportLean,
			TLS:                   UpstreamTLS{ServerName: "mysql.internal", MinVersion: DefaultTLSMinVersion},
			Catalog:               BrokerCatalog{TTL: time.Minute, VaryByPlatform: true, RetryInterval: 2 * time.Second, RetryMaxInterval: 30 * time.Second, OnDrift: OnDriftServe},
			Validation:            Validation{Requests: ModeReport, Responses: ModeEnforce, WithoutCatalog: WithoutCatalogForward},
			ConcurrencyError:      "spec", AllowDeleteDuringCreate: true,
			OrphanMitigation: "mitigate", OrphanSchedule: "1s,1m",
			LockGranularity: "instance", HoldAfterTimeout: 5 * time.Minute,
			Inventory:   BrokerInventory{Secrets: SecretsNone},
			MaxInFlight: 32, QueueTimeout: ptr(15 * time.Second),
			Breaker: &Breaker{Failures: 3, OpenFor: 30 * time.Second, Probes: 2},
		}, {
			Name:                  "legacy",
			URL:                   "http://10.0.0.7:9000",
			APIVersion:            VersionRange{Min: osb.Version{Major: 2, Minor: 0}, Max: osb.Version{Major: 2, Minor: 8}},
			Timeout:               2 * time.Minute,
			DialTimeout:           time.Second,
			TLSHandshakeTimeout:   DefaultTLSHandshakeTimeout,
			ResponseHeaderTimeout: 2 * time.Minute,
			MaxIdleConns:          DefaultMaxIdleConnsPerBroker,
			IdleConnTimeout:       DefaultIdleConnTimeout,
			Transport:             DefaultBrokerTransport,
			TLS:                   UpstreamTLS{MinVersion: DefaultTLSMinVersion},
			Catalog:               BrokerCatalog{TTL: DefaultCatalogTTL, RetryInterval: DefaultCatalogRetryInterval, RetryMaxInterval: DefaultCatalogRetryMaxInterval},
			Validation:            Validation{Requests: DefaultRequestMode, Responses: DefaultResponseMode, WithoutCatalog: DefaultWithoutCatalog},
			ConcurrencyError:      DefaultConcurrencyError, OrphanMitigation: DefaultOrphanMitigation, OrphanSchedule: DefaultOrphanSchedule,
			LockGranularity: DefaultLockGranularity, HoldAfterTimeout: 2 * time.Minute,
			Inventory:   BrokerInventory{Secrets: SecretsNone},
			MaxInFlight: 4, QueueTimeout: ptr(DefaultQueueTimeout),
			Breaker: &Breaker{Failures: DefaultBreakerFailures, OpenFor: DefaultBreakerOpenFor, Probes: DefaultBreakerProbes},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load(full.yaml) mismatch (-want +got):\n%s", diff)
	}
}

// TestLoadDefaults checks the defaults a minimal file gets.
func TestLoadDefaults(t *testing.T) {
	got, err := Load("testdata/good/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wantListen := Listen{
		Address:           DefaultListenAddress,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
		MaxBodyBytes:      DefaultMaxBodyBytes,
		ShutdownGrace:     DefaultShutdownGrace,
		ShutdownDelay:     ptr(DefaultShutdownDelay),
		TLS:               defaultListenTLS,
		Server:            DefaultListenServer,
	}
	if diff := cmp.Diff(wantListen, got.Listen); diff != "" {
		t.Errorf("listen (-want +got):\n%s", diff)
	}
	wantAuth := Auth{Failures: AuthFailures{Rate: DefaultFailureRate, Burst: DefaultFailureBurst,
		MaxAddresses: DefaultFailureMaxAddresses}, FailureCacheTTL: DefaultFailureCacheTTL}
	if diff := cmp.Diff(wantAuth, got.Auth); diff != "" {
		t.Errorf("auth (-want +got):\n%s", diff)
	}
	for _, c := range []struct{ setting, gomaxprocs, want int }{{0, 1, 1}, {0, 2, 1}, {0, 3, 1}, {0, 8, 4}, {6, 2, 6}} {
		if got := (Auth{BcryptConcurrency: c.setting}).BcryptSlots(c.gomaxprocs); got != c.want {
			t.Errorf("bcrypt_concurrency %d at GOMAXPROCS %d: %d slots, want %d", c.setting, c.gomaxprocs, got, c.want)
		}
	}
	for _, c := range []struct{ setting, slots, want int }{{0, 1, 16}, {0, 4, 64}, {5, 4, 5}} {
		if got := (Auth{BcryptQueue: c.setting}).BcryptWaiters(c.slots); got != c.want {
			t.Errorf("bcrypt_queue %d with %d slots: %d may wait, want %d", c.setting, c.slots, got, c.want)
		}
	}
	for _, c := range []struct{ name, got, want string }{
		{"admin.address", got.Admin.Address, DefaultAdminAddress},
		{"log.format", got.Log.Format, DefaultLogFormat},
		{"log.level", got.Log.Level, DefaultLogLevel},
		{"log.access_flush_interval", got.Log.AccessFlushInterval.String(), DefaultAccessFlushInterval.String()},
		{"prefix", got.Tenants[0].Routes[0].Prefix, "/cf-prod/mysql"},
		{"api_version.min", got.Brokers[0].APIVersion.Min.String(), DefaultBrokerMinVersionString},
		{"api_version.max", got.Brokers[0].APIVersion.Max.String(), DefaultBrokerMaxVersionString},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if want := (Runtime{HeapFloor: DefaultHeapFloor, GCPercent: DefaultGCPercent, MemoryLimit: DefaultMemoryLimit}); got.Runtime != want {
		t.Errorf("runtime %+v, want %+v", got.Runtime, want)
	}
	if got.Tenants[0].MissingVersionStatus != DefaultMissingVersionStatus {
		t.Errorf("missing_version_status %d; want %d", got.Tenants[0].MissingVersionStatus, DefaultMissingVersionStatus)
	}
	if b := got.Brokers[0]; b.ResponseHeaderTimeout != b.Timeout || b.Timeout != DefaultBrokerTimeout {
		t.Errorf("timeout %v, response_header_timeout %v; want both %v", b.Timeout, b.ResponseHeaderTimeout, DefaultBrokerTimeout)
	}
}

func TestLoadEnv(t *testing.T) {
	got, err := Load("testdata/good/env.yaml", WithLookupEnv(lookupTestEnv))
	if err != nil {
		t.Fatal(err)
	}
	b := got.Brokers[0]
	for _, c := range []struct{ name, got, want string }{
		{"listen.address", got.Listen.Address, "127.0.0.1:8081"},
		{"tenant password", got.Tenants[0].Credentials[0].Password.Reveal(), "env-platform-password"},
		{"prefix", got.Tenants[0].Routes[0].Prefix, "/prod/mysql"},
		{"broker url", b.URL, "https://mysql-broker.example.com:8443/osb"},
		{"broker password", b.Password.Reveal(), "env-broker-password"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if b.Timeout != 45*time.Second || b.MaxIdleConns != 32 {
		t.Errorf("timeout %v, max_idle_conns %d; want 45s, 32 from the environment", b.Timeout, b.MaxIdleConns)
	}
}

func TestLoadPasswordFile(t *testing.T) {
	got, err := Load("testdata/good/password-file.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if pw := got.Tenants[0].Credentials[0].Password.Reveal(); pw != "file-password" {
		t.Errorf("tenant password = %q, want %q (trailing newline trimmed)", pw, "file-password")
	}
	if pw := got.Brokers[0].Password.Reveal(); pw != "broker-file-password" {
		t.Errorf("broker password = %q, want %q (trailing CRLF trimmed)", pw, "broker-file-password")
	}
}

func TestLoadBaseDir(t *testing.T) {
	// From another base directory the relative password files are missing.
	_, err := Load("testdata/good/password-file.yaml", WithBaseDir(t.TempDir()))
	var probs *Problems
	if !errors.As(err, &probs) || !strings.Contains(err.Error(), "password_file: cannot read") {
		t.Fatalf("Load with another base dir = %v, want password_file problems", err)
	}
	// Parse resolves against Options.BaseDir.
	data := []byte(strings.ReplaceAll(minimalYAML, "password: platform-password", "password_file: cf-prod-password"))
	cfg, err := Parse(data, Options{BaseDir: filepath.Join("testdata", "good", "secrets")})
	if err != nil {
		t.Fatal(err)
	}
	if pw := cfg.Tenants[0].Credentials[0].Password.Reveal(); pw != "file-password" {
		t.Errorf("password = %q, want %q", pw, "file-password")
	}
}

func TestLoadUnreadable(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"))
	var probs *Problems
	if errors.As(err, &probs) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing file) = %v, want an fs.ErrNotExist error that is not *Problems", err)
	}
}

func TestLoadBcrypt(t *testing.T) {
	got, err := Load("testdata/good/bcrypt.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for i, cr := range got.Tenants[0].Credentials {
		if !cr.IsBcrypt() || !strings.HasSuffix(cr.Password.Reveal(), "LOsxoQhC") {
			t.Errorf("credentials[%d]: IsBcrypt %v, password changed by expansion", i, cr.IsBcrypt())
		}
	}
}

func TestConfigLookups(t *testing.T) {
	cfg, err := Load("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Broker("legacy"); b != &cfg.Brokers[1] {
		t.Errorf(`Broker("legacy") = %p, want &Brokers[1]`, b)
	}
	if b := cfg.Broker("nope"); b != nil {
		t.Errorf(`Broker("nope") = %v, want nil`, b)
	}
	if tn := cfg.Tenant("cf-dev"); tn != &cfg.Tenants[1] {
		t.Errorf(`Tenant("cf-dev") = %p, want &Tenants[1]`, tn)
	}
	if n := cfg.RouteCount(); n != 3 {
		t.Errorf("RouteCount = %d, want 3", n)
	}
}

func ptr[T any](v T) *T { return &v }
