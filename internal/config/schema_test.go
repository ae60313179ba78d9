package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// TestJSONSchemaCommitted: schema/gateway.schema.json is what JSONSchema
// returns today (regenerate it with go generate ./cmd/osb-gateway).
func TestJSONSchemaCommitted(t *testing.T) {
	committed, err := os.ReadFile("../../schema/gateway.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, JSONSchema()) {
		t.Error("schema/gateway.schema.json differs from config.JSONSchema(): run go generate ./cmd/osb-gateway")
	}
}

// compileSchema compiles the committed schema with the validator the
// gateway uses for plan parameters.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(JSONSchema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("gateway.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("gateway.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// yamlAsJSON reads a YAML file as the JSON value a schema validator sees.
func yamlAsJSON(t *testing.T, file string) any {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// shippedConfigs are the gateway.yaml files the repository ships: each
// must satisfy the schema (and Load, which other tests check).
func shippedConfigs(t *testing.T) []string {
	files := []string{
		"../../gateway.yaml",
		"../../deploy/docker/gateway.yaml",
		"../../deploy/cloudfoundry/gateway.yaml",
		"../../cmd/osb-gateway/demo.yaml",
	}
	for _, glob := range []string{"testdata/good/*.yaml", "../../examples/*.yaml", "../../examples/*/*.yaml"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

// TestShippedConfigsSatisfySchema: every shipped file validates, and the
// top ones name the schema for editors.
func TestShippedConfigsSatisfySchema(t *testing.T) {
	s := compileSchema(t)
	for _, f := range shippedConfigs(t) {
		if err := s.Validate(yamlAsJSON(t, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, f := range []string{"../../gateway.yaml", "../../deploy/docker/gateway.yaml", "../../deploy/cloudfoundry/gateway.yaml"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), "# yaml-language-server: $schema=") {
			t.Errorf("%s: no yaml-language-server $schema comment", f)
		}
	}
}

// TestSchemaRefusesWhatLoadRefuses: the files Load refuses for their shape
// (a misspelt key, a value of the wrong type, a value outside its enum or
// bounds) are refused by the schema too.
func TestSchemaRefusesWhatLoadRefuses(t *testing.T) {
	s := compileSchema(t)
	for _, f := range []string{"unknown-keys.yaml", "wrong-types.yaml", "missing-required.yaml", "empty.yaml", "bad-durations.yaml"} {
		if err := s.Validate(yamlAsJSON(t, filepath.Join("testdata/bad", f))); err == nil {
			t.Errorf("%s: the schema accepts it", f)
		}
	}
	for _, tc := range []struct{ name, yaml string }{
		{"typo at the top", "tenant: []\ntenants: [{name: a, credentials: [{username: u, password: p}], routes: [{broker: b}]}]\nbrokers: [{name: b, url: http://b}]"},
		{"enum", "log: {level: loud}\ntenants: [{name: a, credentials: [{username: u, password: p}], routes: [{broker: b}]}]\nbrokers: [{name: b, url: http://b}]"},
		{"duration", "brokers: [{name: b, url: http://b, timeout: 30}]\ntenants: [{name: a, credentials: [{username: u, password: p}], routes: [{broker: b}]}]"},
		{"bound", "listen: {max_header_bytes: 100}\ntenants: [{name: a, credentials: [{username: u, password: p}], routes: [{broker: b}]}]\nbrokers: [{name: b, url: http://b}]"},
	} {
		f := filepath.Join(t.TempDir(), "gateway.yaml")
		if err := os.WriteFile(f, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(yamlAsJSON(t, f)); err == nil {
			t.Errorf("%s: the schema accepts it", tc.name)
		}
		if _, err := Load(f); err == nil {
			t.Errorf("%s: Load accepts it", tc.name)
		}
	}
}
