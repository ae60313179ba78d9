package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// goodHash is a bcrypt hash of "platform-password".
const goodHash = "$2a$10$UPyGjCtuNa7IYXUK2jD9uOEtl7687.qvcEcCHkB4rLHZ2LOsxoQhC"

// baseConfig is a valid configuration, before defaults, that rows edit.
func baseConfig() *Config {
	return &Config{
		Tenants: []Tenant{{
			Name:        "cf-prod",
			Credentials: []Credential{{Username: "cc", Password: "tenant-secret-1"}},
			Routes:      []Route{{Broker: "mysql"}, {Broker: "pg"}},
		}, {
			Name:        "cf-dev",
			Credentials: []Credential{{Username: "cc", Password: "tenant-secret-2"}},
			Routes:      []Route{{Broker: "mysql"}},
		}},
		Brokers: []Broker{
			{Name: "mysql", URL: "https://mysql.example.com"},
			{Name: "pg", URL: "http://pg.example.com:8080/osb", Username: "gw", Password: "broker-secret"},
		},
	}
}

// v2 returns API version 2.minor.
func v2(minor int) osb.Version { return osb.Version{Major: 2, Minor: minor} }

// checkConfig runs everything Parse does after decoding and returns the
// problems as "path: message" lines in the order they were found.
func checkConfig(c *Config, baseDir string) []string {
	probs := &Problems{}
	c.ApplyDefaults()
	resolveSecrets(c, baseDir, probs)
	validateTags(c, probs)
	checkFields(c, probs)
	var lines []string
	for _, p := range probs.List {
		lines = append(lines, p.String())
	}
	return lines
}

func TestChecks(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"ca.pem", "client.pem", "client-key.pem"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("pem"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		edit func(c *Config)
		want []string
	}{
		{"valid", func(*Config) {}, nil},

		// Names.
		{"tenant name upper case", func(c *Config) { c.Tenants[0].Name = "CF" },
			[]string{"tenants[0].name: " + nameRule}},
		{"broker name trailing hyphen", func(c *Config) { c.Brokers[0].Name = "mysql-"; c.Tenants[0].Routes[0].Prefix = "/x" },
			[]string{
				"brokers[0].name: " + nameRule,
				`tenants[0].routes[0].broker: no broker is named "mysql" (brokers: pg)`,
				`tenants[1].routes[0].broker: no broker is named "mysql" (brokers: pg)`,
			}},
		{"name too long", func(c *Config) { c.Tenants[1].Name = strings.Repeat("a", 64) },
			[]string{"tenants[1].name: must be at most 63 characters"}},
		{"duplicate tenant", func(c *Config) { c.Tenants[1].Name = "cf-prod"; c.Tenants[1].Routes[0].Prefix = "/dev" },
			[]string{`tenants[1].name: "cf-prod" is already the name of tenants[0]`}},
		{"duplicate broker", func(c *Config) { c.Brokers[1].Name = "mysql"; c.Tenants[0].Routes = c.Tenants[0].Routes[:1] },
			[]string{`brokers[1].name: "mysql" is already the name of brokers[0]`}},

		// State.
		{"replica acks with a Cluster", func(c *Config) {
			c.State.Backend, c.State.Redis.Addrs, c.State.Redis.ReplicaAcks = "redis", []string{"a:6379", "b:6379"}, 1
		}, []string{"state.redis.replica_acks: works with a standalone Redis or Sentinel (state.redis.master_name), not with a Cluster (2 addrs without master_name): a Cluster's writes go to several primaries"}},
		{"replica acks with Sentinel", func(c *Config) {
			c.State.Backend, c.State.Redis.Addrs, c.State.Redis.MasterName, c.State.Redis.ReplicaAcks = "redis", []string{"a:26379", "b:26379"}, "mymaster", 1
		}, nil},
		{"replica acks negative", func(c *Config) {
			c.State.Backend, c.State.Redis.Addrs, c.State.Redis.ReplicaAcks = "redis", []string{"a:6379"}, -1
		}, []string{"state.redis.replica_acks: must not be negative"}},

		// Routes.
		{"route to unknown broker", func(c *Config) { c.Tenants[1].Routes[0].Broker = "redis" },
			[]string{`tenants[1].routes[0].broker: no broker is named "redis" (brokers: mysql, pg)`}},
		{"route to a broker twice", func(c *Config) { c.Tenants[0].Routes[1] = Route{Broker: "mysql", Prefix: "/other"} },
			[]string{`tenants[0].routes[1].broker: "mysql" is already routed by routes[0]; a tenant reaches a broker more than once only through routes that show ids of their own (routes[].ids: {namespace: …}), at most one of them without`}},
		{"route to a broker twice with ids", func(c *Config) {
			c.Tenants[0].Routes[1] = Route{Broker: "mysql", Prefix: "/other", IDs: &RouteIDs{Namespace: "second"}}
		}, nil},
		{"route to a broker twice in one namespace", func(c *Config) {
			c.Tenants[0].Routes[0].IDs = &RouteIDs{Namespace: "6ba7b811-9dad-11d1-80b4-00c04fd430c8"}
			c.Tenants[0].Routes[1] = Route{Broker: "mysql", Prefix: "/other", IDs: &RouteIDs{Namespace: "{6ba7b811-9dad-11d1-80b4-00c04fd430c8}"}}
		}, []string{`tenants[0].routes[1].ids.namespace: "{6ba7b811-9dad-11d1-80b4-00c04fd430c8}" derives the same ids as routes[0].ids.namespace "6ba7b811-9dad-11d1-80b4-00c04fd430c8", on the same broker "mysql": give each route to a broker a namespace of its own`}},
		{"route to a broker twice, both with limits", func(c *Config) {
			lim := &Limits{Mutations: &LimitRate{Rate: 1, Burst: 1}, Scope: LimitScopeLocal}
			c.Tenants[0].Routes[0].Limits = lim
			c.Tenants[0].Routes[1] = Route{Broker: "mysql", Prefix: "/other", IDs: &RouteIDs{Namespace: "second"}, Limits: lim}
		}, []string{`tenants[0].routes[1].limits: routes[0] to broker "mysql" has limits already: a tenant's limits on a broker are kept once, so set them on one of its routes to it`}},
		{"ids without namespace", func(c *Config) { c.Tenants[1].Routes[0].IDs = &RouteIDs{} },
			[]string{"tenants[1].routes[0].ids.namespace: is required"}},
		{"route without broker", func(c *Config) { c.Tenants[1].Routes[0].Broker = "" },
			[]string{"tenants[1].routes[0].broker: is required"}},
		{"no routes", func(c *Config) { c.Tenants[1].Routes = nil },
			[]string{"tenants[1].routes: is required"}},

		// Prefix overlap, across tenants.
		{"same prefix", func(c *Config) { c.Tenants[1].Routes[0].Prefix = "/cf-prod/mysql" },
			[]string{`tenants[1].routes[0].prefix: "/cf-prod/mysql" is also the prefix of tenants[0].routes[0]`}},
		{"prefix inside another", func(c *Config) { c.Tenants[1].Routes[0].Prefix = "/cf-prod/pg/more" },
			[]string{`tenants[1].routes[0].prefix: "/cf-prod/pg/more" is inside "/cf-prod/pg" (tenants[0].routes[1].prefix); prefixes must not nest`}},
		{"prefix enclosing another", func(c *Config) { c.Tenants[1].Routes[0].Prefix = "/cf-prod" },
			[]string{`tenants[1].routes[0].prefix: "/cf-prod" encloses "/cf-prod/mysql" (tenants[0].routes[0].prefix); prefixes must not nest`}},
		{"sibling prefixes do not overlap", func(c *Config) {
			c.Tenants[0].Routes[0].Prefix = "/a"
			c.Tenants[1].Routes[0].Prefix = "/ab"
		}, nil},
		{"bad prefix", func(c *Config) { c.Tenants[0].Routes[0].Prefix = "/a/v2" },
			[]string{`tenants[0].routes[0].prefix: "/a/v2" must not contain a "v2" segment: the gateway matches <prefix>/v2/... itself`}},

		// Broker URLs never printed.
		{"url with credentials", func(c *Config) { c.Brokers[0].URL = "https://u:broker-secret@h" },
			[]string{"brokers[0].url: must not hold credentials; put them in username and password (or password_file)"}},

		// Versions.
		{"min above max", func(c *Config) { c.Brokers[0].APIVersion = VersionRange{Min: v2(14), Max: v2(13)} },
			[]string{"brokers[0].api_version: min 2.14 is above max 2.13"}},
		{"min equals max", func(c *Config) { c.Brokers[0].APIVersion = VersionRange{Min: v2(8), Max: v2(8)} }, nil},
		{"max too new", func(c *Config) { c.Brokers[0].APIVersion.Max = v2(18) },
			[]string{"brokers[0].api_version.max: 2.18 is newer than 2.17, the newest version the gateway understands"}},
		{"major 1", func(c *Config) { c.Brokers[0].APIVersion.Min = osb.Version{Major: 1, Minor: 9} },
			[]string{"brokers[0].api_version.min: 1.9 is not an OSB API version: the major version must be 2"}},

		// Durations.
		{"write timeout shorter than broker timeout", func(c *Config) {
			c.Listen.WriteTimeout = 30 * time.Second
			c.Brokers[1].Timeout = 45 * time.Second
		}, []string{"listen.write_timeout: 30s is shorter than brokers[0].timeout (1m0s); the responses of slow calls would be cut off"}},
		{"write timeout equal to broker timeout", func(c *Config) { c.Listen.WriteTimeout = DefaultBrokerTimeout }, nil},
		{"unknown listen server", func(c *Config) { c.Listen.Server = "fast" },
			[]string{"listen.server: must be one of lean, standard"}},
		{"negative shutdown grace", func(c *Config) { c.Listen.ShutdownGrace = -time.Second },
			[]string{"listen.shutdown_grace: must not be negative"}},
		{"broker timeout over an hour", func(c *Config) { c.Brokers[0].Timeout = 61 * time.Minute },
			[]string{"brokers[0].timeout: must be at most 1h"}},
		{"access flush interval over 10s", func(c *Config) { d := 11 * time.Second; c.Log.AccessFlushInterval = &d },
			[]string{"log.access_flush_interval: must be at most 10s"}},
		{"access flush interval zero", func(c *Config) { d := time.Duration(0); c.Log.AccessFlushInterval = &d }, nil},
		{"negative response header timeout", func(c *Config) { c.Brokers[0].ResponseHeaderTimeout = -1 },
			[]string{"brokers[0].response_header_timeout: must not be negative"}},

		// Passwords.
		{"tenant without password", func(c *Config) { c.Tenants[0].Credentials[0].Password = "" },
			[]string{"tenants[0].credentials[0].password: is required (or set password_file)"}},
		{"tenant bcrypt password", func(c *Config) { c.Tenants[0].Credentials[0].Password = goodHash }, nil},
		{"tenant broken bcrypt", func(c *Config) { c.Tenants[0].Credentials[0].Password = Secret(goodHash[:59]) },
			[]string{"tenants[0].credentials[0].password: starts like a bcrypt hash but is not one: it has 59 characters, not 60"}},
		{"tenant bcrypt bad separator", func(c *Config) { c.Tenants[0].Credentials[0].Password = Secret(goodHash[:6] + "x" + goodHash[7:]) },
			[]string{`tenants[0].credentials[0].password: starts like a bcrypt hash but is not one: it must be "$2a$", "$2b$" or "$2y$", a two-digit cost, "$" and 53 characters of salt and hash`}},
		{"broker username without password", func(c *Config) { c.Brokers[0].Username = "gw" },
			[]string{"brokers[0].password: is required when username is set (or set password_file)"}},
		{"broker password without username", func(c *Config) { c.Brokers[0].Password = "x" },
			[]string{"brokers[0].username: is required when a password is set"}},
		{"broker bcrypt password", func(c *Config) { c.Brokers[1].Password = goodHash },
			[]string{"brokers[1].password: is a bcrypt hash, but the gateway must send the broker its real password"}},

		// Upstream TLS files.
		{"tls files readable", func(c *Config) {
			c.Brokers[0].TLS = UpstreamTLS{CAFile: "ca.pem", CertFile: "client.pem", KeyFile: filepath.Join(dir, "client-key.pem")}
		}, nil},
		{"cert without key", func(c *Config) { c.Brokers[0].TLS.CertFile = "client.pem" },
			[]string{"brokers[0].tls.key_file: is required when cert_file is set"}},
		{"key without cert", func(c *Config) { c.Brokers[0].TLS.KeyFile = "client-key.pem" },
			[]string{"brokers[0].tls.cert_file: is required when key_file is set"}},
		{"ca file missing", func(c *Config) { c.Brokers[0].TLS.CAFile = "nope.pem" },
			[]string{`brokers[0].tls.ca_file: cannot read "nope.pem": no such file or directory`}},
		{"ca file is a directory", func(c *Config) { c.Brokers[0].TLS.CAFile = "." },
			[]string{`brokers[0].tls.ca_file: cannot read ".": is a directory`}},

		// Other tags.
		{"admin off", func(c *Config) { c.Admin.Address = "off" }, nil},
		{"admin OFF", func(c *Config) { c.Admin.Address = "OFF" },
			[]string{`admin.address: must be "off" or host:port such as ":8080", "127.0.0.1:9090" or "[::1]:8080" (missing port in address)`}},
		{"log format", func(c *Config) { c.Log.Format = "logfmt" },
			[]string{"log.format: must be one of json, text"}},
		{"missing version status", func(c *Config) { c.Tenants[0].MissingVersionStatus = 428 },
			[]string{"tenants[0].missing_version_status: must be one of 400, 412"}},
		{"max header bytes", func(c *Config) { c.Listen.MaxHeaderBytes = 100 },
			[]string{"listen.max_header_bytes: must be at least 4096"}},
		{"memory limit", func(c *Config) { c.Runtime.MemoryLimit = "1.5GiB" },
			[]string{`runtime.memory_limit: must be "auto" (90% of the cgroup's memory limit), a size such as "512MiB" or "2GiB" (B, KiB, MiB, GiB, TiB), or "off"; got "1.5GiB"`}},
		{"memory limit zero", func(c *Config) { c.Runtime.MemoryLimit = "0" },
			[]string{`runtime.memory_limit: must be "auto" (90% of the cgroup's memory limit), a size such as "512MiB" or "2GiB" (B, KiB, MiB, GiB, TiB), or "off"; got "0"`}},
		{"memory limit auto", func(c *Config) { c.Runtime.MemoryLimit = "auto" }, nil},
		{"memory limit off", func(c *Config) { c.Runtime.MemoryLimit = "off" }, nil},
		{"heap floor off", func(c *Config) { c.Runtime.HeapFloor = "0" }, nil},
		{"heap floor", func(c *Config) { c.Runtime.HeapFloor = "64mb" },
			[]string{`runtime.heap_floor: must be a size such as "64MiB" or "1GiB" (B, KiB, MiB, GiB, TiB), or 0 to turn the floor off; got "64mb"`}},
		{"gc percent low", func(c *Config) { c.Runtime.GCPercent = 5 },
			[]string{"runtime.gc_percent: must be at least 10"}},
		{"gc percent high", func(c *Config) { c.Runtime.GCPercent = 20000 },
			[]string{"runtime.gc_percent: must be at most 10000"}},
		{"no credentials", func(c *Config) { c.Tenants[0].Credentials = []Credential{} },
			[]string{"tenants[0].credentials: must be at least 1 entry"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig()
			tt.edit(c)
			got := checkConfig(c, dir)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckPrefix(t *testing.T) {
	tests := []struct{ prefix, want string }{
		{"/cf", ""},
		{"/cf-prod/mysql_1.x~y", ""},
		{"/a/v2x/v3", ""},
		{"cf", `must start with "/"`},
		{"/", `must not end with "/"`},
		{"/cf/", `must not end with "/"`},
		{"/a//b", `must not contain "//"`},
		{"/a/./b", `must not contain "." or ".." segments`},
		{"/a/..", `must not contain "." or ".." segments`},
		{"/a%2Fb", `may hold only letters, digits, "-", ".", "_", "~" and "/"`},
		{"/a b", `may hold only letters, digits, "-", ".", "_", "~" and "/"`},
		{"/a?b", `may hold only letters, digits, "-", ".", "_", "~" and "/"`},
		{"/v2", `must not contain a "v2" segment: the gateway matches <prefix>/v2/... itself`},
		{"/a/v2/b", `must not contain a "v2" segment: the gateway matches <prefix>/v2/... itself`},
	}
	for _, tt := range tests {
		if got := checkPrefix(tt.prefix); got != tt.want {
			t.Errorf("checkPrefix(%q) = %q, want %q", tt.prefix, got, tt.want)
		}
	}
}

func TestCheckBrokerURL(t *testing.T) {
	const want = "must be an absolute http or https URL"
	tests := []struct{ url, want string }{
		{"https://broker.example.com", ""},
		{"http://10.0.0.1:8080/base/path", ""},
		{"http://[::1]:8080", ""},
		{"broker.example.com", want},
		{"/v2", want},
		{"ftp://h", want},
		{"https:opaque", want + " with a host"},
		{"https://", want + " with a host"},
		{"https://u@h", "must not hold credentials; put them in username and password (or password_file)"},
		{"https://h?a=b", "must not have a query"},
		{"https://h/?", "must not have a query"},
		{"https://h#f", "must not have a fragment"},
		{"https://h/#", "must not have a fragment"},
		{"http://h:port", want},
	}
	for _, tt := range tests {
		if got := checkBrokerURL(tt.url); got != tt.want {
			t.Errorf("checkBrokerURL(%q) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

func TestCheckHostPort(t *testing.T) {
	tests := []struct{ addr, want string }{
		{":8080", ""},
		{"127.0.0.1:9090", ""},
		{"[::1]:8080", ""},
		{"[fe80::1%eth0]:8080", ""},
		{"localhost:0", ""},
		{"gateway.internal.:65535", ""},
		{"8080", "missing port in address"},
		{"::1:8080", "too many colons in address"},
		{"[::1]", "missing port in address"},
		{":65536", "the port must be a number from 0 to 65535"},
		{":-1", "the port must be a number from 0 to 65535"},
		{":http", "the port must be a number from 0 to 65535"},
		{":08080", "the port must be a number from 0 to 65535"},
		{"bad_host:80", "the host must be empty, a host name or an IP address"},
		{"-a:80", "the host must be empty, a host name or an IP address"},
	}
	for _, tt := range tests {
		if got := checkHostPort(tt.addr); got != tt.want {
			t.Errorf("checkHostPort(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}
