package rules

import (
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// The -update flag rewrites golden files. Other test files of the package
// may define it too, so it is registered only if no one has.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files from the current output")
	}
}

// updating reports whether the test run was started with -update.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// testCatalog is the Index of testdata/requests/catalog.json.
var testCatalog = sync.OnceValue(func() *Index {
	body, err := os.ReadFile("testdata/requests/catalog.json")
	if err != nil {
		panic(err)
	}
	ix, _, err := NewIndex(body)
	if err != nil {
		panic(err)
	}
	return ix
})

// ruleIDs returns the rule ids of vs, in order.
func ruleIDs(vs []Violation) []string {
	var ids []string
	for _, v := range vs {
		ids = append(ids, v.Rule)
	}
	return ids
}

// wire renders the refusal of vs as the gateway writes it: the status line
// and the OSB error body.
func wire(vs []Violation) string {
	rec := httptest.NewRecorder()
	osb.WriteError(rec, Reject(vs))
	return strconv.Itoa(rec.Code) + "\n" + rec.Body.String()
}

// checkGolden compares the refusal of vs with testdata/<dir>/<name>.golden,
// rewriting the file under -update.
func checkGolden(t *testing.T, dir, name string, vs []Violation) {
	t.Helper()
	got := wire(vs)
	file := filepath.Join("testdata", dir, name+".golden")
	if updating() {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("refusal differs from %s (-want +got):\n%s", file, diff)
	}
}

// checkNoStrayGoldens fails for golden files in testdata/<dir> that no test
// case wrote, so that renamed cases do not leave stale files behind.
func checkNoStrayGoldens(t *testing.T, dir string, names []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		name = name[:len(name)-len(".golden")]
		if !slices.Contains(names, name) {
			if updating() {
				_ = os.Remove(f)
				continue
			}
			t.Errorf("%s belongs to no test case (run with -update to remove it)", f)
		}
	}
}

func TestReject(t *testing.T) {
	if got := Reject(nil); got != nil {
		t.Errorf("Reject(nil) = %v, want nil", got)
	}
	vs := []Violation{
		{Rule: "a", Status: 422, Code: osb.CodeMaintenanceInfoConflict, Description: "first"},
		{Rule: "b", Status: 400, Description: "second"},
	}
	want := &osb.Error{Status: 422, Code: osb.CodeMaintenanceInfoConflict, Description: "2 problems: first; second"}
	if diff := cmp.Diff(want, Reject(vs)); diff != "" {
		t.Errorf("Reject mismatch (-want +got):\n%s", diff)
	}
}
