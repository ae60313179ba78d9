package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/mutation"
)

// The real build carries no mutation.
func TestNoMutationByDefault(t *testing.T) {
	if got := mutation.Active(); len(got) != 0 {
		t.Fatalf("mutations on in the default build: %q", got)
	}
	if mutation.LockFree || mutation.KeepDeleted || mutation.NoOrphans || mutation.DropInventoryWrite || mutation.AckBeforeStore {
		t.Fatal("a mutation constant is true in the default build")
	}
}

// Every -mutation builds the gateway with its tag, and its tag turns on
// exactly its own constant.
func TestMutationsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the request path once per mutation")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(mutation.All) < 5 {
		t.Fatalf("%d mutations, want at least 5", len(mutation.All))
	}
	for _, m := range mutation.All {
		t.Run(m.Name, func(t *testing.T) {
			if tagOf(m.Name) != m.Tag {
				t.Fatalf("-mutation %s: tag %q, want %q", m.Name, tagOf(m.Name), m.Tag)
			}
			// The packages the mutations reach compile with the tag (the
			// campaign links the binary itself: -mutation).
			build := exec.Command("go", "build", "-tags", m.Tag, "./internal/mutation", "./proxy/...")
			build.Dir = root
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build -tags %s: %v\n%s", m.Tag, err, out)
			}
			check := exec.Command("go", "test", "-count=1", "-tags", m.Tag, "-run", "^TestActive$", "./internal/mutation")
			check.Dir, check.Env = root, append(os.Environ(), "MUTATION_WANT="+m.Name)
			if out, err := check.CombinedOutput(); err != nil {
				t.Fatalf("-tags %s does not turn on exactly %s: %v\n%s", m.Tag, m.Name, err, out)
			}
		})
	}
}
