package rules

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// tenPropertySchema is a provision schema of ten typed properties, as
// brokers write them; salt makes schemas of different plans differ.
func tenPropertySchema(salt int) map[string]any {
	return map[string]any{
		"$schema": "http://json-schema.org/draft-04/schema#",
		"type":    "object",
		"properties": map[string]any{
			"name":          map[string]any{"type": "string", "minLength": 1, "maxLength": 63, "pattern": "^[a-z][a-z0-9-]*$", "description": "Name of the database."},
			"storage_gb":    map[string]any{"type": "integer", "minimum": 1, "maximum": 100 + salt, "description": "Disk size in gigabytes."},
			"version":       map[string]any{"type": "string", "enum": []string{"5.7", "8.0", fmt.Sprintf("9.%d", salt)}},
			"ha":            map[string]any{"type": "boolean", "description": "Run a standby replica."},
			"backups":       map[string]any{"type": "integer", "minimum": 0, "maximum": 30},
			"region":        map[string]any{"type": "string", "enum": []string{"eu-west", "us-east", "ap-south"}},
			"tags":          map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": 10},
			"cpu":           map[string]any{"type": "number", "minimum": 0.25, "maximum": 64},
			"maintenance":   map[string]any{"type": "object", "properties": map[string]any{"day": map[string]any{"type": "string"}, "hour": map[string]any{"type": "integer", "minimum": 0, "maximum": 23}}},
			"admin_contact": map[string]any{"type": "string", "format": "email"},
		},
		"required":             []string{"name"},
		"additionalProperties": false,
	}
}

// tenPropertyParams are parameters valid against tenPropertySchema.
const tenPropertyParams = `{"name": "orders", "storage_gb": 50, "version": "8.0", "ha": true, "backups": 7,
	"region": "eu-west", "tags": ["prod", "team-a"], "cpu": 2, "maintenance": {"day": "sun", "hour": 3},
	"admin_contact": "dba@example.com"}`

// generatedCatalog builds a catalog of at least size bytes: services of ten
// plans, each plan with a provision, an update and a bind schema. With
// shared, a plan's update schema repeats its provision schema (common in
// practice); otherwise every schema in the catalog differs.
func generatedCatalog(tb testing.TB, size int, shared bool) []byte {
	tb.Helper()
	type m = map[string]any
	var services []m
	for n, s := 0, 0; n < size; s++ {
		var plans []m
		for p := range 10 {
			k := s*10 + p
			update := tenPropertySchema(k)
			if !shared {
				update = tenPropertySchema(k + 1_000_000)
			}
			plans = append(plans, m{
				"id": fmt.Sprintf("plan-%06d", k), "name": fmt.Sprintf("plan-%d", p),
				"description": "A generated plan with its own parameter schemas.", "free": p%2 == 0,
				"metadata":                 m{"displayName": fmt.Sprintf("Plan %d", p), "bullets": []string{"generated", "benchmark"}},
				"maximum_polling_duration": 3600, "maintenance_info": m{"version": fmt.Sprintf("1.%d.0", p)},
				"schemas": m{
					"service_instance": m{"create": m{"parameters": tenPropertySchema(k)}, "update": m{"parameters": update}},
					"service_binding":  m{"create": m{"parameters": tenPropertySchema(k + 2_000_000)}},
				},
			})
		}
		services = append(services, m{
			"id": fmt.Sprintf("service-%04d", s), "name": fmt.Sprintf("service-%d", s),
			"description": "A generated service.", "bindable": true, "tags": []string{"generated"},
			"plans": plans,
		})
		b, err := json.Marshal(services[len(services)-1])
		if err != nil {
			tb.Fatal(err)
		}
		n += len(b)
	}
	body, err := json.Marshal(m{"services": services})
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// TestGeneratedCatalog checks that the benchmarks measure what they claim:
// a clean catalog of the size asked for, whose schemas all compile. The
// benchmarks check their 1 MB catalogs the same way before they start.
func TestGeneratedCatalog(t *testing.T) {
	for _, shared := range []bool{false, true} {
		body := generatedCatalog(t, 64<<10, shared)
		ix := checkGeneratedCatalog(t, body, 64<<10)
		for _, s := range ix.Catalog().Services {
			for _, p := range s.Plans {
				for k := range SchemaKind(numSchemaKinds) {
					if ix.ParameterSchema(p.ID, k) == nil {
						t.Fatalf("plan %s has no compiled %s schema", p.ID, k)
					}
				}
			}
		}
		if err := ix.ParameterSchema("plan-000000", InstanceCreate).Validate(json.RawMessage(tenPropertyParams)); err != nil {
			t.Fatal(err)
		}
	}
}

// checkGeneratedCatalog fails unless body has at least size bytes and
// builds an index without findings, compile findings included (so every
// schema of the index returned is compiled).
func checkGeneratedCatalog(tb testing.TB, body []byte, size int) *Index {
	tb.Helper()
	ix, _, err := NewIndex(body)
	if err != nil || len(body) < size {
		tb.Fatalf("generated catalog: %d bytes, err %v", len(body), err)
	}
	if findings := ix.Findings(); len(findings) > 0 {
		tb.Fatalf("generated catalog: findings %v", findings)
	}
	return ix
}

// BenchmarkNewIndex measures what a catalog fetch costs the gateway: decode,
// check the schemas without compiling them, build the lookups and lint.
func BenchmarkNewIndex(b *testing.B) {
	for _, bc := range []struct {
		name string
		body []byte
	}{
		{"sample-broker", samplebroker.New(samplebroker.Options{}).Catalog()},
		{"1MB-distinct-schemas", generatedCatalog(b, 1<<20, false)},
		{"1MB-update-repeats-create", generatedCatalog(b, 1<<20, true)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			checkGeneratedCatalog(b, bc.body, 0)
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := NewIndex(bc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNewIndexFrom measures a refresh that finds the catalog's schemas
// unchanged: decode, lint and lookups; the schemas' checks are reused.
func BenchmarkNewIndexFrom(b *testing.B) {
	body := generatedCatalog(b, 1<<20, false)
	prev := checkGeneratedCatalog(b, body, 1<<20)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := NewIndexFrom(prev, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLintSchemas measures what Index.Findings adds to NewIndex for
// osb-gateway check: compiling every schema of a 1 MB catalog.
func BenchmarkLintSchemas(b *testing.B) {
	body := generatedCatalog(b, 1<<20, false)
	checkGeneratedCatalog(b, body, 1<<20)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		ix, _, err := NewIndex(body)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if fs := ix.LintSchemas(); len(fs) > 0 {
			b.Fatal(fs)
		}
	}
}

// BenchmarkValidate measures one provision's parameter check against a
// ten-property schema, decoding included.
func BenchmarkValidate(b *testing.B) {
	raw, err := json.Marshal(tenPropertySchema(0))
	if err != nil {
		b.Fatal(err)
	}
	cs := mustCompile(b, string(raw))
	for _, bc := range []struct {
		name, params string
		wantErr      bool
	}{
		{"10-properties-valid", tenPropertyParams, false},
		{"10-properties-3-violations", `{"storage_gb": 500, "version": "9", "ha": "yes", "region": "eu-west"}`, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			params := json.RawMessage(bc.params)
			b.ReportAllocs()
			for b.Loop() {
				if err := cs.Validate(params); (err != nil) != bc.wantErr {
					b.Fatal(err)
				}
			}
		})
	}
}
