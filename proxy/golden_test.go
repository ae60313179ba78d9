package proxy

import (
	"flag"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// checkGolden compares an error answer with testdata/errors/<name>.golden.
func checkGolden(t *testing.T, name string, res *http.Response, body string) {
	t.Helper()
	osbtest.CheckErrorGolden(t, filepath.Join("testdata", "errors", name+".golden"), res, body, *update)
}
