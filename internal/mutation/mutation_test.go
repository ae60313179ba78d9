package mutation

import (
	"os"
	"slices"
	"testing"
)

// TestActive checks that the build's tags turn on exactly the mutations
// MUTATION_WANT names (comma-separated; unset or empty: none), as
// bench/campaign's TestMutationsBuild runs it under each tag.
func TestActive(t *testing.T) {
	var want []string
	if w := os.Getenv("MUTATION_WANT"); w != "" {
		want = []string{w}
	}
	if got := Active(); !slices.Equal(got, want) {
		t.Fatalf("active mutations %q, want %q", got, want)
	}
}
