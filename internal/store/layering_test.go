package store

import (
	"go/build"
	"os"
	"path"
	"slices"
	"testing"
)

// TestLayering keeps the packages of the state store in their places, as
// certmagic's Storage implementations stand beside its interface: this
// package is the contract and imports no backend; each backend (every
// directory beside it but storetest and backend) imports this package and
// no other backend, in its code or its tests; storetest, which every
// backend's tests import, imports no backend; only backend, the opener,
// imports them all.
func TestLayering(t *testing.T) {
	const self = "github.com/osb-gateway/osb-gateway/internal/store"
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var backends []string // import paths
	for _, e := range entries {
		if e.IsDir() && e.Name() != "storetest" && e.Name() != "backend" && e.Name() != "testdata" {
			backends = append(backends, path.Join(self, e.Name()))
		}
	}
	for _, want := range []string{"bolt", "memory", "postgres", "redis"} {
		if !slices.Contains(backends, path.Join(self, want)) {
			t.Errorf("found backends %q, want %s among them", backends, want)
		}
	}
	opener := path.Join(self, "backend")
	imports := func(dir string, tests bool) []string {
		t.Helper()
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("read package %s: %v", dir, err)
		}
		if !tests {
			return p.Imports
		}
		return slices.Concat(p.Imports, p.TestImports, p.XTestImports)
	}
	forbid := func(what string, got []string, bad ...string) {
		t.Helper()
		for _, imp := range got {
			if slices.Contains(bad, imp) {
				t.Errorf("%s imports %s", what, imp)
			}
		}
	}
	notBackends := append(slices.Clone(backends), opener)
	forbid("internal/store", imports(".", true), notBackends...)
	forbid("internal/store/storetest", imports("storetest", false), notBackends...)
	for _, b := range backends {
		dir := path.Base(b)
		got := imports(dir, true)
		if !slices.Contains(imports(dir, false), self) {
			t.Errorf("backend %s does not import %s: not a backend beside the contract?", b, self)
		}
		forbid("backend "+b+" (code or tests)", got, slices.DeleteFunc(slices.Clone(notBackends), func(p string) bool { return p == b })...)
	}
	for _, b := range backends {
		if !slices.Contains(imports("backend", false), b) {
			t.Errorf("internal/store/backend does not open %s", b)
		}
	}
}
