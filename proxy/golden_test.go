package proxy

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// checkGolden compares an error answer (status, the headers a platform acts
// on, body) with testdata/errors/<name>.golden.
func checkGolden(t *testing.T, name string, res *http.Response, body string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", res.StatusCode)
	for _, h := range []string{"Content-Type", "Www-Authenticate", "Allow"} {
		if v := res.Header.Get(h); v != "" {
			fmt.Fprintf(&b, "%s: %s\n", h, v)
		}
	}
	b.WriteString(body)
	got := b.String()
	path := filepath.Join("testdata", "errors", name+".golden")
	if *update {
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
		t.Fatalf("%v (run go test ./proxy -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("answer differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
