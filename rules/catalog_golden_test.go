package rules

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The -update flag rewrites golden files. It is registered in init, after
// every package-level variable, so a `var update = flag.Bool("update", ...)`
// elsewhere in the package's tests takes precedence instead of panicking.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files under testdata/")
	}
}

// updatingGolden reports whether the test run was given -update.
func updatingGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// catalogGolden compares got with the golden file at path (under
// testdata/catalogs), or rewrites the file when run with -update.
func catalogGolden(t *testing.T, path string, got string) {
	t.Helper()
	if updatingGolden() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got); run with -update if the change is intended:\n%s", path, diff)
	}
}
