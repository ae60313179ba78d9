package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Trace exporters (telemetry.traces.exporter).
const (
	TraceExporterNone     = "none"      // no spans leave the process
	TraceExporterStdout   = "stdout"    // spans as JSON on standard output, for trying things out
	TraceExporterOTLPGRPC = "otlp_grpc" // OTLP over gRPC, to a collector (default port 4317)
	TraceExporterOTLPHTTP = "otlp_http" // OTLP over HTTP/protobuf (default port 4318)
)

// Audit sinks (audit.sink), fsync policies (audit.fsync) and parameter
// treatments (audit.parameters).
const (
	AuditSinkOff    = "off"    // no audit records
	AuditSinkStdout = "stdout" // JSON lines on standard output
	AuditSinkFile   = "file"   // JSON lines in audit.path, rotated by size

	AuditFsyncAlways   = "always"   // each record is on disk before the response is complete
	AuditFsyncInterval = "interval" // records are buffered, written and synced every fsync_interval
	AuditFsyncNever    = "never"    // records are buffered and written every fsync_interval; the OS syncs

	AuditParametersKeys = "keys" // the top-level keys of "parameters", never their values
	AuditParametersOmit = "omit" // nothing of "parameters"
)

// Defaults of the telemetry and audit sections. Each names the key it
// fills.
const (
	DefaultTraceExporter        = TraceExporterNone   // telemetry.traces.exporter
	DefaultSampleRatio          = 1.0                 // telemetry.traces.sample_ratio
	DefaultMetricsEnabled       = true                // telemetry.metrics.enabled
	DefaultServiceName          = "osb-gateway"       // telemetry.service_name
	DefaultAuditSink            = AuditSinkOff        // audit.sink
	DefaultAuditMaxSize         = "100MiB"            // audit.max_size
	DefaultAuditMaxFiles        = 10                  // audit.max_files
	DefaultAuditFsync           = AuditFsyncInterval  // audit.fsync
	DefaultAuditFsyncInterval   = time.Second         // audit.fsync_interval
	DefaultAuditParameters      = AuditParametersKeys // audit.parameters
	DefaultAuditHeadLogInterval = time.Minute         // audit.head_log_interval
)

// MinAuditHMACKeyBytes is the shortest audit.hmac_key_file key: 256 bits,
// the strength of HMAC-SHA256.
const MinAuditHMACKeyBytes = 32

// minAuditMaxSize is the smallest audit.max_size: a few records.
const minAuditMaxSize = 4 << 10

// Telemetry is the gateway's OpenTelemetry setup: traces to an exporter,
// metrics for Prometheus on the admin listener.
type Telemetry struct {
	// ServiceName is the service.name resource attribute; zero value:
	// DefaultServiceName.
	ServiceName string `yaml:"service_name" validate:"max=255"`
	// InstanceID is service.instance.id; empty: "<hostname>-<pid>", chosen
	// at start.
	InstanceID string `yaml:"instance_id" validate:"max=255"`
	// ResourceAttributes are further resource attributes (deployment.environment,
	// …); they never override service.name, service.version or
	// service.instance.id.
	ResourceAttributes map[string]string `yaml:"resource_attributes"`
	Traces             Traces            `yaml:"traces"`
	Metrics            Metrics           `yaml:"metrics"`
}

// Traces says where spans go and how many are kept.
type Traces struct {
	// Exporter is one of the TraceExporter constants; zero value:
	// DefaultTraceExporter (none).
	Exporter string `yaml:"exporter" validate:"oneof=none stdout otlp_grpc otlp_http"`
	// Endpoint is the collector, as host:port or as an http(s) URL; empty:
	// the exporter's default (localhost:4317 or :4318, or the
	// OTEL_EXPORTER_OTLP_ENDPOINT environment variable). An otlp_http URL
	// without a path gets /v1/traces.
	Endpoint string `yaml:"endpoint"`
	// Insecure speaks plain text to a host:port endpoint (a URL's scheme
	// says it by itself).
	Insecure bool `yaml:"insecure"`
	// Headers are sent with every export (an API key, say). Values are
	// taken as written: ${NAME} is not expanded in them, so secrets belong
	// in the OTEL_EXPORTER_OTLP_HEADERS environment variable instead.
	Headers map[string]Secret `yaml:"headers"`
	// SampleRatio is the share of new traces recorded, 0 to 1; a call that
	// continues a platform's trace follows the platform's decision. Zero
	// value (unset): DefaultSampleRatio.
	SampleRatio *float64 `yaml:"sample_ratio" validate:"gte=0,lte=1"`
}

// Metrics says whether the admin listener serves /metrics.
type Metrics struct {
	// Enabled turns metrics on; unset: DefaultMetricsEnabled.
	Enabled *bool `yaml:"enabled"`
}

// Ratio returns the sample ratio, DefaultSampleRatio when unset.
func (t Traces) Ratio() float64 {
	if t.SampleRatio == nil {
		return DefaultSampleRatio
	}
	return *t.SampleRatio
}

// On reports whether metrics are enabled (DefaultMetricsEnabled when unset).
func (m Metrics) On() bool { return m.Enabled == nil || *m.Enabled }

// Audit is the audit log: one record per platform call, credentials and
// parameter values never written.
type Audit struct {
	// Sink is one of the AuditSink constants; zero value: DefaultAuditSink.
	Sink string `yaml:"sink" validate:"oneof=off stdout file"`
	// Path is the file of the file sink; rotated files are Path.000001,
	// Path.000002, … (oldest first). Relative to the configuration file's
	// directory (Load resolves it).
	Path string `yaml:"path"`
	// MaxSize rotates the file before it grows past this size, such as
	// "100MiB"; zero value: DefaultAuditMaxSize.
	MaxSize string `yaml:"max_size"`
	// MaxFiles is how many rotated files are kept; older ones are
	// deleted. Zero value: DefaultAuditMaxFiles.
	MaxFiles int `yaml:"max_files" validate:"gte=1,lte=100000"`
	// Fsync is one of the AuditFsync constants; zero value:
	// DefaultAuditFsync.
	Fsync string `yaml:"fsync" validate:"oneof=always interval never"`
	// FsyncInterval is how often buffered records are written (and, for
	// fsync interval, synced); zero value: DefaultAuditFsyncInterval.
	FsyncInterval time.Duration `yaml:"fsync_interval" validate:"gt=0,lte=1h"`
	// Parameters is one of the AuditParameters constants; zero value:
	// DefaultAuditParameters.
	Parameters string `yaml:"parameters" validate:"oneof=keys omit"`
	// HMACKeyFile holds the key (at least MinAuditHMACKeyBytes bytes; a
	// trailing newline is not part of it) that makes each record's hash an
	// HMAC-SHA256, so that whoever can edit the audit file cannot
	// recompute the chain without it. Relative to the config file. Empty:
	// plain SHA-256 hashes.
	HMACKeyFile string `yaml:"hmac_key_file"`
	// HeadLogInterval is how often the chain's head (the current file,
	// its record count and last hash) is logged when records were added,
	// a copy of the head file outside the audit directory. Zero value:
	// DefaultAuditHeadLogInterval.
	HeadLogInterval time.Duration `yaml:"head_log_interval" validate:"gt=0,lte=24h"`
}

// MaxSizeBytes returns MaxSize in bytes; valid after Parse.
func (a Audit) MaxSizeBytes() int64 {
	n, _ := ParseSize(a.MaxSize)
	return n
}

// applyTelemetryDefaults fills the telemetry and audit sections.
func applyTelemetryDefaults(c *Config) {
	t := &c.Telemetry
	if t.ServiceName == "" {
		t.ServiceName = DefaultServiceName
	}
	if t.Traces.Exporter == "" {
		t.Traces.Exporter = DefaultTraceExporter
	}
	if t.Traces.SampleRatio == nil {
		r := DefaultSampleRatio
		t.Traces.SampleRatio = &r
	}
	if t.Metrics.Enabled == nil {
		on := DefaultMetricsEnabled
		t.Metrics.Enabled = &on
	}
	a := &c.Audit
	if a.Sink == "" {
		a.Sink = DefaultAuditSink
	}
	if a.MaxSize == "" {
		a.MaxSize = DefaultAuditMaxSize
	}
	if a.MaxFiles == 0 {
		a.MaxFiles = DefaultAuditMaxFiles
	}
	if a.Fsync == "" {
		a.Fsync = DefaultAuditFsync
	}
	setDuration(&a.FsyncInterval, DefaultAuditFsyncInterval)
	setDuration(&a.HeadLogInterval, DefaultAuditHeadLogInterval)
	if a.Parameters == "" {
		a.Parameters = DefaultAuditParameters
	}
}

// checkTelemetry runs the checks of the telemetry and audit sections that
// span fields or need more than a tag.
func checkTelemetry(c *Config, probs *Problems) {
	tr := c.Telemetry.Traces
	if tr.Endpoint != "" {
		if msg := checkCollector(tr.Endpoint, tr.Insecure); msg != "" {
			probs.addf("telemetry.traces.endpoint", "%s", msg)
		}
	}
	for _, k := range sortedKeys(tr.Headers) {
		path := "telemetry.traces.headers." + k
		switch {
		case !validHeaderName(k):
			probs.addf(path, "is not a valid HTTP header name")
		case strings.Contains(tr.Headers[k].Reveal(), "${"):
			probs.addf(path, "${NAME} is not expanded in headers; set OTEL_EXPORTER_OTLP_HEADERS in the environment instead")
		}
	}
	for k := range c.Telemetry.ResourceAttributes {
		if k == "" || strings.HasPrefix(k, "service.") {
			probs.addf("telemetry.resource_attributes", `keys must be non-empty and must not start with "service." (use service_name and instance_id)`)
			break
		}
	}
	a := c.Audit
	if n, ok := ParseSize(a.MaxSize); !ok {
		probs.addf("audit.max_size", `must be a size such as "100MiB" (B, KiB, MiB, GiB, TiB)`)
	} else if n < minAuditMaxSize {
		probs.addf("audit.max_size", "must be at least 4KiB")
	}
	if a.Sink == AuditSinkFile && a.Path == "" {
		probs.addf("audit.path", "is required when audit.sink is file")
	}
	if a.Sink == AuditSinkFile && strings.HasSuffix(a.Path, "/") {
		probs.addf("audit.path", "must name a file, not a directory")
	}
}

// resolveAuditKey makes audit.hmac_key_file relative to baseDir and checks
// that it holds a key long enough (never quoting it).
func resolveAuditKey(a *Audit, baseDir string, probs *Problems) {
	if a.HMACKeyFile == "" {
		return
	}
	name := a.HMACKeyFile
	a.HMACKeyFile = resolvePath(baseDir, name)
	if _, err := ReadAuditKey(a.HMACKeyFile); err != nil {
		probs.addf("audit.hmac_key_file", "%q: %s", name, fileError(err))
	}
}

// ReadAuditKey reads an audit HMAC key file: its content less a trailing
// newline ("\n" or "\r\n"), at least MinAuditHMACKeyBytes bytes. Generate
// one with: head -c 32 /dev/urandom | base64 > audit-hmac.key
func ReadAuditKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key := []byte(strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r"))
	if len(key) < MinAuditHMACKeyBytes {
		return nil, fmt.Errorf("holds a key of %d bytes; an audit HMAC key needs at least %d (head -c 32 /dev/urandom | base64 > FILE)", len(key), MinAuditHMACKeyBytes)
	}
	return key, nil
}

// checkCollector returns what is wrong with a trace collector endpoint, or
// "". It never quotes the value.
func checkCollector(s string, insecure bool) string {
	if !strings.Contains(s, "://") {
		if host, _, err := net.SplitHostPort(s); err != nil || host == "" || checkHostPort(s) != "" {
			return `must be host:port such as "otel-collector:4317", or an http or https URL`
		}
		return ""
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "must be an absolute http or https URL with a host, or host:port"
	case u.User != nil:
		return "must not hold credentials; send them in headers"
	case insecure && u.Scheme == "https":
		return "is an https URL while insecure is true; use an http URL for plain text"
	}
	return ""
}

// sizeRE is the audit.max_size syntax (as runtime.memory_limit, without "off").
var sizeRE = regexp.MustCompile(`^([0-9]+)(B|KiB|MiB|GiB|TiB)?$`)

// ParseSize parses a size such as "100MiB" into bytes (a number with an
// optional B, KiB, MiB, GiB or TiB suffix, GOMEMLIMIT's syntax), up to 2^62.
func ParseSize(s string) (int64, bool) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	shift := map[string]uint{"": 0, "B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[m[2]]
	if n > (1<<62)>>shift {
		return 0, false
	}
	return n << shift, true
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// sortedKeys returns m's keys in order, so problems come out stable.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
