package admin

import (
	"flag"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// The tenant of the test gateways (adminEnv).
const (
	t1User = "t1-user"
	t1Pass = "t1-pass"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// checkGolden compares an error answer with testdata/errors/<name>.golden.
func checkGolden(t *testing.T, name string, res *http.Response, body string) {
	t.Helper()
	osbtest.CheckErrorGolden(t, filepath.Join("testdata", "errors", name+".golden"), res, body, *update)
}

// send sends req with the default client and returns the answer and its
// body.
func send(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	return osbtest.Send(t, req)
}

// do sends method url with basic auth and version (osbtest.Do).
func do(t *testing.T, method, url, user, pass, version string, body io.Reader) (*http.Response, string) {
	t.Helper()
	return osbtest.Do(t, method, url, user, pass, version, body)
}

// scrape returns the text of h's GET /metrics.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	return osbtest.Scrape(t, h)
}
