package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// minimalYAML is a valid configuration that tests extend or edit.
const minimalYAML = `tenants:
  - name: cf-prod
    credentials:
      - username: cc
        password: platform-password
    routes:
      - broker: mysql
brokers:
  - name: mysql
    url: https://mysql.example.com
`

// problems parses doc with env and returns the problems as "path: message"
// lines, or nil if doc is valid.
func problems(t *testing.T, doc string, env map[string]string) []string {
	t.Helper()
	_, err := Parse([]byte(doc), Options{LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err == nil {
		return nil
	}
	var probs *Problems
	if !errors.As(err, &probs) {
		t.Fatalf("Parse error %T %v, want *Problems", err, err)
	}
	return strings.Split(probs.Error(), "\n")
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		doc  string // appended to minimalYAML
		env  map[string]string
		want []string
	}{
		{
			name: "unknown keys all reported with lines",
			doc:  "listen:\n  adress: x\n  addres: y\nextra: 1\n",
			want: []string{
				"listen.adress: unknown key (line 12)",
				"listen.addres: unknown key (line 13)",
				"extra: unknown key (line 14)",
			},
		},
		{
			name: "duplicate key",
			doc:  "log:\n  level: info\n  level: debug\n",
			want: []string{"log.level: duplicate key (line 13, first on line 12)"},
		},
		{
			name: "duplicate top-level key",
			doc:  "tenants: []\n",
			want: []string{"tenants: duplicate key (line 11, first on line 1)"},
		},
		{
			name: "scalar for mapping",
			doc:  "runtime: fast\n",
			want: []string{"runtime: must be a mapping of keys to values, not a single value (line 11)"},
		},
		{
			name: "list for scalar",
			doc:  "admin:\n  address: [a, b]\n",
			want: []string{"admin.address: must be a single value, not a list (line 12)"},
		},
		{
			name: "integer overflow",
			doc:  "runtime:\n  gc_percent: 99999999999999999999\n",
			want: []string{"runtime.gc_percent: must be a whole number (line 12)"},
		},
		{
			name: "duration without unit",
			doc:  "listen:\n  read_timeout: 30\n",
			want: []string{`listen.read_timeout: must be a duration such as "90s" or "1m30s" (line 12)`},
		},
		{
			name: "null leaves the default",
			doc:  "listen:\n  address: ~\nlog:\n",
		},
		{
			name: "env in an integer",
			doc:  "runtime:\n  gc_percent: ${GOGC}\n",
			env:  map[string]string{"GOGC": "50"},
		},
		{
			name: "env that does not convert",
			doc:  "runtime:\n  gc_percent: ${GOGC}\n",
			env:  map[string]string{"GOGC": "many"},
			want: []string{"runtime.gc_percent: must be a whole number (line 12)"},
		},
		{
			name: "env set to empty",
			doc:  "log:\n  level: ${LEVEL}\n",
			env:  map[string]string{"LEVEL": ""},
		},
		{
			name: "two undefined variables in one value",
			doc:  "admin:\n  address: ${HOST}:${PORT}\n",
			want: []string{"admin.address: environment variables HOST, PORT are not set (line 12)"},
		},
		{
			name: "second document",
			doc:  "---\nlog: {}\n",
			want: []string{"line 11: a second YAML document; the file must hold one"},
		},
		{
			name: "syntax error",
			doc:  "log: [\n",
			want: []string{"line 11: did not find expected node content"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, minimalYAML+tt.doc, tt.env)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeVersion checks that "2.10" is minor version 10, not the float
// 2.1, however it is written.
func TestDecodeVersion(t *testing.T) {
	tests := []struct {
		name     string
		apiVer   string
		min, max osb.Version
	}{
		{"plain floats", "{min: 2.10, max: 2.13}", osb.Version{Major: 2, Minor: 10}, osb.Version{Major: 2, Minor: 13}},
		{"quoted", `{min: "2.1", max: '2.10'}`, osb.Version{Major: 2, Minor: 1}, osb.Version{Major: 2, Minor: 10}},
		{"block", "\n      min: 2.0\n      max: 2.17", osb.Version{Major: 2}, osb.Version{Major: 2, Minor: 17}},
		{"max only", "{max: 2.8}", osb.Version{Major: 2}, osb.Version{Major: 2, Minor: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(minimalYAML+"    api_version: "+tt.apiVer+"\n"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := VersionRange{Min: tt.min, Max: tt.max}
			if diff := cmp.Diff(want, cfg.Brokers[0].APIVersion); diff != "" {
				t.Errorf("api_version (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeAliasAndMerge(t *testing.T) {
	doc := strings.Replace(minimalYAML, "      - broker: mysql\n",
		"      - broker: mysql\n      - broker: pg\n", 1) +
		"    <<: &common {timeout: 20s, dial_timeout: 2s}\n" +
		"  - name: pg\n    url: https://pg.example.com\n    dial_timeout: 1s\n    <<: *common\n"
	cfg, err := Parse([]byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pg := cfg.Broker("pg")
	if pg.Timeout.String() != "20s" || pg.DialTimeout.String() != "1s" {
		t.Errorf("pg timeout %v dial %v; want 20s from the merge, 1s written beside it", pg.Timeout, pg.DialTimeout)
	}
}

func TestParseUsesProcessEnvironment(t *testing.T) {
	t.Setenv("OSB_GATEWAY_TEST_LEVEL", "warn")
	cfg, err := Parse([]byte(minimalYAML+"log:\n  level: ${OSB_GATEWAY_TEST_LEVEL}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Log.Level != "warn" {
		t.Errorf("log.level = %q, want %q", cfg.Log.Level, "warn")
	}
}

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"A": "alpha", "B_2": "beta", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name, in, want, err string
	}{
		{name: "no reference", in: "plain", want: "plain"},
		{name: "whole value", in: "${A}", want: "alpha"},
		{name: "embedded", in: "x-${A}-${B_2}-y", want: "x-alpha-beta-y"},
		{name: "empty value", in: "[${EMPTY}]", want: "[]"},
		{name: "bcrypt untouched", in: "$2a$10$abc./XYZ", want: "$2a$10$abc./XYZ"},
		{name: "dollar without brace", in: "$A and $", want: "$A and $"},
		{name: "undefined", in: "${NOPE}", err: "environment variable NOPE is not set"},
		{name: "unterminated", in: "${A", err: `has "${" without a closing "}"`},
		{name: "empty name", in: "${}", err: "${} does not name an environment variable (letters, digits and _, not starting with a digit)"},
		{name: "bad name", in: "${A-B}", err: "${A-B} does not name an environment variable (letters, digits and _, not starting with a digit)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := expandEnv(tt.in, lookup)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != tt.want || gotErr != tt.err {
				t.Errorf("expandEnv(%q) = %q, %q; want %q, %q", tt.in, got, gotErr, tt.want, tt.err)
			}
		})
	}
}

func TestDecodeAliasBomb(t *testing.T) {
	// 300 aliases of a tenant with 1000 aliases of a credential: a million
	// values from a file of a few kilobytes.
	doc := "tenants:\n  - &t\n    name: x\n    credentials: [&c {username: u, password: p}" +
		strings.Repeat(", *c", 999) + "]\n" + strings.Repeat("  - *t\n", 299)
	_, err := Parse([]byte(doc), Options{})
	if err == nil || !strings.Contains(err.Error(), "too many aliases") {
		t.Fatalf("Parse(alias bomb) = %.500v, want a too-many-values problem", err)
	}
}

// FuzzParse checks that Parse never panics and fails only with *Problems.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("a: &a [*a]\ntenants: *a\n"))
	f.Add([]byte("tenants: [{name: x, routes: [{<<: {broker: y}}]}]"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Parse(data, Options{BaseDir: dir, LookupEnv: func(string) (string, bool) { return "", false }})
		var probs *Problems
		if err != nil && (!errors.As(err, &probs) || probs.Len() == 0) {
			t.Fatalf("Parse error %T %v, want non-empty *Problems", err, err)
		}
	})
}
