package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// korifiRequest sends what Korifi sends (korifi #3716): a body with no
// Content-Type header, also on DELETE, where it carries the deprovision
// parameters.
func korifiRequest(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(prodUser, prodPass)
	req.Header.Set("X-Broker-API-Version", "2.15")
	if _, ok := req.Header["Content-Type"]; ok {
		t.Fatalf("%s %s: the request carries a Content-Type; Korifi's does not", method, url)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestKorifiRequestsAreTolerated pins what the gateway accepts today from
// Korifi (korifi #3716): PUT and PATCH without Content-Type, and a DELETE
// whose body holds the deprovision parameters. Each reaches the broker and
// the platform gets the broker's answer.
func TestKorifiRequestsAreTolerated(t *testing.T) {
	e := newEnv(t)
	inst := e.url + prodSample + "/v2/service_instances/korifi-1"
	ids := `"service_id": "` + samplebroker.ServiceID + `", "plan_id": "` + samplebroker.PlanSyncID + `"`
	steps := []struct {
		name, method, url, body string
		want                    int
	}{
		{"provision without Content-Type", http.MethodPut, inst,
			`{` + ids + `, "organization_guid": "org-k", "space_guid": "space-k", "context": {"platform": "kubernetes", "namespace": "ns"}}`, http.StatusCreated},
		{"update without Content-Type", http.MethodPatch, inst,
			`{"service_id": "` + samplebroker.ServiceID + `", "parameters": {"size": "medium"}}`, http.StatusOK},
		{"deprovision with a body", http.MethodDelete,
			inst + "?service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanSyncID,
			`{` + ids + `, "parameters": {"purge": true}}`, http.StatusOK},
	}
	for _, s := range steps {
		before := len(e.brokers["sample"].exchanges())
		got, body := korifiRequest(t, s.method, s.url, s.body)
		if got != s.want {
			t.Fatalf("%s: status %d, want %d; body %s", s.name, got, s.want, body)
		}
		reached := 0
		for _, x := range e.brokers["sample"].exchanges()[before:] {
			if x.Method == s.method && x.Path == "/v2/service_instances/korifi-1" {
				reached++
			}
		}
		if reached != 1 {
			t.Fatalf("%s: the broker saw %d %s of the instance, want 1", s.name, reached, s.method)
		}
	}
}
