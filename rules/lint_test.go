package rules

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// lintCases are the catalogs under testdata/catalogs, one per rule or
// family of rules; each has a golden file of its findings (or of its decode
// error) beside it.
var lintCases = []struct {
	file      string
	rule      string
	decodeErr bool // NewIndex fails
	clean     bool // no findings at all
}{
	{file: "good-sample-broker", rule: "the sample broker's catalog is clean", clean: true},
	{file: "good-full", rule: "every field the model knows, all drafts, no findings", clean: true},
	{file: "good-plan-bindable-override", rule: "a bindable plan of a non-bindable service is fine", clean: true},
	{file: "required-fields", rule: "ids, names, descriptions and bindable are required; blank counts as missing"},
	{file: "services-missing", rule: `"services" is required`},
	{file: "services-empty", rule: "no services is allowed, with a warning"},
	{file: "no-plans", rule: "a service needs at least one plan"},
	{file: "duplicate-ids", rule: "service ids and plan ids are unique across the catalog"},
	{file: "duplicate-names", rule: "service names are unique, plan names within their service"},
	{file: "cli-names", rule: "names should be CLI-friendly: letters, digits, periods, hyphens"},
	{file: "id-characters", rule: "ids should use RFC 3986 unreserved characters"},
	{file: "string-lengths", rule: "255 characters for ids and names (error), descriptions (warning), 10000 for service descriptions, 2048 for tags"},
	{file: "requires", rule: "requires holds only syslog_drain, route_forwarding, volume_mount"},
	{file: "maintenance-info", rule: "maintenance_info.version is required and semver 2.0.0"},
	{file: "polling-duration", rule: "maximum_polling_duration is positive"},
	{file: "metadata", rule: "metadata is an object"},
	{file: "schema-dollar-schema", rule: `"$schema" is required and names a known draft`},
	{file: "schema-external-ref", rule: "external $ref refused, local and embedded $id refs fine"},
	{file: "schema-invalid", rule: `schemas are valid against their metaschema, objects, with "type": "object"`},
	{file: "schema-size-and-sharing", rule: "at most 64 kB; a schema shared by plans is reported at each; null is no schema"},
	{file: "schema-binding-not-bindable", rule: "a binding schema on a plan that is not bindable is unused"},
	{file: "decode-syntax", rule: "invalid JSON is an error with its byte offset", decodeErr: true},
	{file: "decode-not-object", rule: "a catalog is a JSON object", decodeErr: true},
	{file: "decode-wrong-type", rule: "a value of the wrong type is an error with its path", decodeErr: true},
	{file: "decode-wrong-type-bindable", rule: "bindable is a boolean", decodeErr: true},
	{file: "decode-services-object", rule: "services is an array", decodeErr: true},
}

// TestLintGolden compares Index.Findings, every finding, with the golden
// files, and checks that it holds NewIndex's compile-free findings and
// LintSchemas' compile findings, in order, and nothing else.
func TestLintGolden(t *testing.T) {
	for _, tc := range lintCases {
		t.Run(tc.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", "catalogs", tc.file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			ix, checked, err := NewIndex(body)
			if (err != nil) != tc.decodeErr {
				t.Fatalf("NewIndex error = %v, want error: %t", err, tc.decodeErr)
			}
			var findings []Finding
			var got strings.Builder
			switch {
			case err != nil:
				if ix != nil {
					t.Errorf("NewIndex returned an index with error %v", err)
				}
				fmt.Fprintf(&got, "error: %v\n", err)
			default:
				findings = ix.Findings()
				checkFindingsMerge(t, findings, checked, ix.LintSchemas())
				if len(findings) == 0 {
					got.WriteString("no findings\n")
				}
			}
			for _, f := range findings {
				got.WriteString(f.String() + "\n")
			}
			if tc.clean && len(findings) > 0 {
				t.Errorf("want no findings, got %d", len(findings))
			}
			catalogGolden(t, filepath.Join("testdata", "catalogs", tc.file+".golden"), got.String())
		})
	}
}

// checkFindingsMerge fails unless all is checked and compiled merged: both
// in their order, nothing else.
func checkFindingsMerge(t *testing.T, all, checked, compiled []Finding) {
	t.Helper()
	var gotChecked, gotCompiled []Finding
	for _, f := range all {
		if len(gotChecked) < len(checked) && f == checked[len(gotChecked)] {
			gotChecked = append(gotChecked, f)
		} else {
			gotCompiled = append(gotCompiled, f)
		}
	}
	if diff := cmp.Diff(checked, gotChecked); diff != "" {
		t.Errorf("Findings() does not hold NewIndex's findings in order (-NewIndex +Findings):\n%s", diff)
	}
	if diff := cmp.Diff(compiled, gotCompiled); diff != "" {
		t.Errorf("Findings() beyond NewIndex's are not LintSchemas() (-LintSchemas +Findings):\n%s", diff)
	}
}

// TestLintCasesCoverTestdata keeps lintCases and testdata/catalogs in step.
func TestLintCasesCoverTestdata(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "catalogs", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, f := range files {
		got = append(got, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	for _, tc := range lintCases {
		want = append(want, tc.file)
	}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lintCases and testdata/catalogs/*.json differ (-cases +files):\n%s", diff)
	}
}

// TestLintSampleBroker lints the sample broker's live catalogs, modern and
// legacy: the gateway's own demo must be clean.
func TestLintSampleBroker(t *testing.T) {
	for _, tc := range []struct {
		name   string
		legacy bool
	}{{"modern", false}, {"legacy", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ix, _, err := NewIndex(samplebroker.New(samplebroker.Options{Legacy: tc.legacy}).Catalog())
			if err != nil {
				t.Fatal(err)
			}
			if findings := ix.Findings(); len(findings) > 0 {
				t.Errorf("findings: %v", findings)
			}
		})
	}
}

// TestFindingsInCatalogOrder checks that services[10] sorts after
// services[2], and a service's own fields before its plans.
func TestFindingsInCatalogOrder(t *testing.T) {
	var services []string
	for i := range 12 {
		services = append(services, fmt.Sprintf(`{"id":"s%d","name":"n%d","bindable":true,"plans":[{"id":"p%d","name":"p"}]}`, i, i, i))
	}
	_, findings, err := NewIndex([]byte(`{"services":[` + strings.Join(services, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range findings {
		got = append(got, f.Path)
	}
	var want []string
	for i := range 12 {
		want = append(want, fmt.Sprintf("services[%d].description", i), fmt.Sprintf("services[%d].plans[0].description", i))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("finding paths (-want +got):\n%s", diff)
	}
}

func TestCLIFriendly(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		bad  rune
	}{
		{"lower case", "mysql", 0},
		{"upper case allowed since 2.14", "MySQL", 0},
		{"periods and hyphens", "p-mysql.v8", 0},
		{"digits", "v2", 0},
		{"space", "my sql", ' '},
		{"underscore", "my_sql", '_'},
		{"non-ASCII letter", "größe", 'ö'},
		{"slash", "a/b", '/'},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, bad := cliFriendly(tc.in)
			if bad != (tc.bad != 0) || c != tc.bad {
				t.Errorf("cliFriendly(%q) = %q, %t; want %q", tc.in, c, bad, tc.bad)
			}
		})
	}
}

func TestUnreservedID(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		bad  rune
	}{
		{"GUID", "2f6e1a70-6f5c-4d2a-9a11-7c3b1e0d0001", 0},
		{"all unreserved", "a.b_c~d-E9", 0},
		{"space", "a b", ' '},
		{"slash", "a/b", '/'},
		{"percent", "a%20", '%'},
		{"question mark", "a?b", '?'},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, bad := unreservedID(tc.in)
			if bad != (tc.bad != 0) || c != tc.bad {
				t.Errorf("unreservedID(%q) = %q, %t; want %q", tc.in, c, bad, tc.bad)
			}
		})
	}
}

func TestSemverPattern(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"0.0.0", true},
		{"1.2.3", true},
		{"10.20.30", true},
		{"1.0.0-alpha", true},
		{"1.0.0-alpha.1", true},
		{"1.0.0-0.3.7", true},
		{"1.0.0-x.7.z.92", true},
		{"1.0.0+20130313144700", true},
		{"1.0.0-beta+exp.sha.5114f85", true},
		{"1.0", false},
		{"1", false},
		{"v1.2.3", false},
		{"01.2.3", false},
		{"1.2.3-01", false},
		{"1.2.3-", false},
		{"1.2.3+", false},
		{"1.2.3.4", false},
		{" 1.2.3", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := semverPattern.MatchString(tc.in); got != tc.want {
				t.Errorf("semver %q = %t, want %t", tc.in, got, tc.want)
			}
		})
	}
}

func TestSeverityText(t *testing.T) {
	for _, tc := range []struct {
		s    Severity
		want string
	}{{SeverityWarning, "warning"}, {SeverityError, "error"}, {0, "unknown"}} {
		t.Run(tc.want, func(t *testing.T) {
			b, err := json.Marshal(Finding{Path: "services", Severity: tc.s, Message: "m"})
			if err != nil {
				t.Fatal(err)
			}
			want := `{"path":"services","severity":"` + tc.want + `","message":"m"}`
			if string(b) != want || tc.s.String() != tc.want {
				t.Errorf("got %s and %q, want %s", b, tc.s.String(), want)
			}
		})
	}
}
