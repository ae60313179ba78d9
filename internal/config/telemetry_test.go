package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// defaultTelemetry is the telemetry section of a file that leaves it out.
func defaultTelemetry() Telemetry {
	ratio, on := DefaultSampleRatio, DefaultMetricsEnabled
	return Telemetry{ServiceName: DefaultServiceName,
		Traces:  Traces{Exporter: DefaultTraceExporter, SampleRatio: &ratio},
		Metrics: Metrics{Enabled: &on}}
}

// defaultAudit is the audit section of a file that leaves it out.
func defaultAudit() Audit {
	return Audit{Sink: DefaultAuditSink, MaxSize: DefaultAuditMaxSize, MaxFiles: DefaultAuditMaxFiles,
		Fsync: DefaultAuditFsync, FsyncInterval: DefaultAuditFsyncInterval, Parameters: DefaultAuditParameters,
		HeadLogInterval: DefaultAuditHeadLogInterval}
}

func TestTelemetryDefaults(t *testing.T) {
	c := baseConfig()
	if lines := checkConfig(c, t.TempDir()); lines != nil {
		t.Fatalf("problems: %q", lines)
	}
	if diff := cmp.Diff(defaultTelemetry(), c.Telemetry); diff != "" {
		t.Errorf("telemetry defaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(defaultAudit(), c.Audit); diff != "" {
		t.Errorf("audit defaults (-want +got):\n%s", diff)
	}
	if !c.Telemetry.Metrics.On() || c.Telemetry.Traces.Ratio() != 1 || c.Audit.MaxSizeBytes() != 100<<20 {
		t.Errorf("On %v, Ratio %v, MaxSizeBytes %d", c.Telemetry.Metrics.On(), c.Telemetry.Traces.Ratio(), c.Audit.MaxSizeBytes())
	}
}

func TestTelemetryParse(t *testing.T) {
	cfg, err := Parse([]byte(`
brokers: [{name: b, url: "http://127.0.0.1:1"}]
tenants: [{name: t, credentials: [{username: u, password: p}], routes: [{broker: b}]}]
telemetry:
  service_name: gw
  instance_id: gw-1
  resource_attributes: {deployment.environment: prod}
  traces:
    exporter: otlp_http
    endpoint: https://collector.example.com:4318
    headers: {x-api-key: literal-key}
    sample_ratio: 0
  metrics: {enabled: false}
audit:
  sink: file
  path: /var/log/osb/audit.log
  max_size: 10MiB
  max_files: 3
  fsync: always
  fsync_interval: 5s
  parameters: omit
  head_log_interval: 10m
`), Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	zero, off := 0.0, false
	want := Telemetry{ServiceName: "gw", InstanceID: "gw-1", ResourceAttributes: map[string]string{"deployment.environment": "prod"},
		Traces: Traces{Exporter: TraceExporterOTLPHTTP, Endpoint: "https://collector.example.com:4318",
			Headers: map[string]Secret{"x-api-key": "literal-key"}, SampleRatio: &zero},
		Metrics: Metrics{Enabled: &off}}
	if diff := cmp.Diff(want, cfg.Telemetry); diff != "" {
		t.Errorf("telemetry (-want +got):\n%s", diff)
	}
	wantAudit := Audit{Sink: AuditSinkFile, Path: "/var/log/osb/audit.log", MaxSize: "10MiB", MaxFiles: 3,
		Fsync: AuditFsyncAlways, FsyncInterval: 5 * time.Second, Parameters: AuditParametersOmit,
		HeadLogInterval: 10 * time.Minute}
	if diff := cmp.Diff(wantAudit, cfg.Audit); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if cfg.Telemetry.Metrics.On() || cfg.Telemetry.Traces.Ratio() != 0 || cfg.Audit.MaxSizeBytes() != 10<<20 {
		t.Error("accessors disagree with the file")
	}
}

func TestTelemetryChecks(t *testing.T) {
	ratio := 1.5
	tests := []struct {
		name string
		edit func(c *Config)
		want []string
	}{
		{"valid otlp grpc host:port", func(c *Config) {
			c.Telemetry.Traces = Traces{Exporter: TraceExporterOTLPGRPC, Endpoint: "otel-collector:4317", Insecure: true}
		}, nil},
		{"unknown exporter", func(c *Config) { c.Telemetry.Traces.Exporter = "jaeger" },
			[]string{"telemetry.traces.exporter: must be one of none, stdout, otlp_grpc, otlp_http"}},
		{"ratio above 1", func(c *Config) { c.Telemetry.Traces.SampleRatio = &ratio },
			[]string{"telemetry.traces.sample_ratio: must be at most 1"}},
		{"endpoint without port", func(c *Config) { c.Telemetry.Traces.Endpoint = "collector" },
			[]string{`telemetry.traces.endpoint: must be host:port such as "otel-collector:4317", or an http or https URL`}},
		{"endpoint with credentials", func(c *Config) { c.Telemetry.Traces.Endpoint = "https://u:pw@collector:4318" },
			[]string{"telemetry.traces.endpoint: must not hold credentials; send them in headers"}},
		{"https endpoint and insecure", func(c *Config) {
			c.Telemetry.Traces.Endpoint, c.Telemetry.Traces.Insecure = "https://collector:4318", true
		}, []string{"telemetry.traces.endpoint: is an https URL while insecure is true; use an http URL for plain text"}},
		{"unexpanded header", func(c *Config) { c.Telemetry.Traces.Headers = map[string]Secret{"x-key": "${KEY}"} },
			[]string{"telemetry.traces.headers.x-key: ${NAME} is not expanded in headers; set OTEL_EXPORTER_OTLP_HEADERS in the environment instead"}},
		{"bad header name", func(c *Config) { c.Telemetry.Traces.Headers = map[string]Secret{"x key": "v"} },
			[]string{"telemetry.traces.headers.x key: is not a valid HTTP header name"}},
		{"service resource attribute", func(c *Config) { c.Telemetry.ResourceAttributes = map[string]string{"service.name": "x"} },
			[]string{`telemetry.resource_attributes: keys must be non-empty and must not start with "service." (use service_name and instance_id)`}},
		{"file sink without path", func(c *Config) { c.Audit.Sink = AuditSinkFile },
			[]string{"audit.path: is required when audit.sink is file"}},
		{"unknown sink", func(c *Config) { c.Audit.Sink = "syslog" },
			[]string{"audit.sink: must be one of off, stdout, file"}},
		{"bad size", func(c *Config) { c.Audit.MaxSize = "100MB" },
			[]string{`audit.max_size: must be a size such as "100MiB" (B, KiB, MiB, GiB, TiB)`}},
		{"size too small", func(c *Config) { c.Audit.MaxSize = "1KiB" },
			[]string{"audit.max_size: must be at least 4KiB"}},
		{"bad fsync and parameters", func(c *Config) { c.Audit.Fsync, c.Audit.Parameters = "sometimes", "values" },
			[]string{"audit.fsync: must be one of always, interval, never", "audit.parameters: must be one of keys, omit"}},
		{"negative max files", func(c *Config) { c.Audit.MaxFiles = -1 },
			[]string{"audit.max_files: must be at least 1"}},
		{"hmac key file relative to the config file", func(c *Config) { c.Audit.HMACKeyFile = "keys/audit.key" }, nil},
		{"hmac key file missing", func(c *Config) { c.Audit.HMACKeyFile = "nope.key" },
			[]string{`audit.hmac_key_file: "nope.key": no such file or directory`}},
		{"hmac key too short", func(c *Config) { c.Audit.HMACKeyFile = "keys/short.key" },
			[]string{`audit.hmac_key_file: "keys/short.key": holds a key of 31 bytes; an audit HMAC key needs at least 32 (head -c 32 /dev/urandom | base64 > FILE)`}},
		{"head log interval too long", func(c *Config) { c.Audit.HeadLogInterval = 48 * time.Hour },
			[]string{"audit.head_log_interval: must be at most 24h"}},
		{"trusted proxies", func(c *Config) {
			c.Listen.TrustedProxies = []string{"10.0.0.7", "10.0.0.0/8", "fd00::/8", "::ffff:10.1.0.0/112"}
		}, nil},
		{"bad trusted proxies", func(c *Config) {
			c.Listen.TrustedProxies = []string{"10.0.0.1/8", "lb.example.com", "fe80::1%eth0"}
		}, []string{
			`listen.trusted_proxies[0]: must be an IP address (10.0.0.7) or a CIDR prefix without host bits (10.0.0.0/8, fd00::/8), got "10.0.0.1/8"`,
			`listen.trusted_proxies[1]: must be an IP address (10.0.0.7) or a CIDR prefix without host bits (10.0.0.0/8, fd00::/8), got "lb.example.com"`,
			`listen.trusted_proxies[2]: must be an IP address (10.0.0.7) or a CIDR prefix without host bits (10.0.0.0/8, fd00::/8), got "fe80::1%eth0"`,
		}},
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]string{"audit.key": strings.Repeat("k", 32) + "\n", "short.key": strings.Repeat("k", 31) + "\r\n"} {
		if err := os.WriteFile(filepath.Join(dir, "keys", name), []byte(key), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := baseConfig()
			tc.edit(c)
			if diff := cmp.Diff(tc.want, checkConfig(c, dir)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{"4096": 4096, "4096B": 4096, "4KiB": 4096, "100MiB": 100 << 20, "2GiB": 2 << 30, "1TiB": 1 << 40} {
		if got, ok := ParseSize(s); !ok || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "MiB", "1.5MiB", "-1", "10mb", "99999999999TiB"} {
		if _, ok := ParseSize(s); ok {
			t.Errorf("ParseSize(%q) accepted", s)
		}
	}
}
