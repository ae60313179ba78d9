package proxy

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// TestRequestIdentityEchoedOnce: the platform gets its request identity
// (or the one the gateway made for it) in exactly one header, whether the
// broker echoes it or not. The scope stage sets it on the answer and
// ReverseProxy adds the broker's headers to it, so before the fix every
// proxied answer carried it twice.
func TestRequestIdentityEchoedOnce(t *testing.T) {
	echo := osbtest.NewBroker(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-Broker-Api-Request-Identity"] = r.Header.Values("X-Broker-API-Request-Identity")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"state":"in progress"}`))
	})
	silent := osbtest.NewBroker(t, nil)
	_, gw := testGateway(t, twoTenantYAML, env(echo.URL, silent.URL))
	for _, tc := range []struct{ name, broker, sent string }{
		{"broker echoes", "b1", "req-1"},
		{"broker echoes a made identity", "b1", ""},
		{"broker does not echo", "b2", "req-2"},
		{"broker does not echo a made identity", "b2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", gw.URL+"/t1/"+tc.broker+"/v2/service_instances/x/last_operation", nil)
			req.SetBasicAuth(t1User, t1Pass)
			req.Header.Set("X-Broker-API-Version", "2.14")
			if tc.sent != "" {
				req.Header.Set("X-Broker-API-Request-Identity", tc.sent)
			}
			res, _ := send(t, req)
			got := res.Header.Values("X-Broker-API-Request-Identity")
			want := tc.sent
			if want == "" && len(got) > 0 {
				want = got[0] // made by the gateway
			}
			if diff := cmp.Diff([]string{want}, got); diff != "" || want == "" {
				t.Errorf("%d: request identity headers (-want +got):\n%s", res.StatusCode, diff)
			}
		})
	}
}
