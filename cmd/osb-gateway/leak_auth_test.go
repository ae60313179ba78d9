package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// Marker secrets of the broker's outbound authentication.
const (
	leakNextPassword = "MARKER-NEXT-PASSWORD-3e71"
	leakBearerToken  = "MARKER-BEARER-TOKEN-c04d"
	leakClientSecret = "MARKER-CLIENT-SECRET-8a15"
	leakOAuthToken   = "MARKER-OAUTH2-TOKEN-" // + the token's number
)

// TestNoBrokerTokenLeaks runs a lifecycle through a gateway that reaches
// its broker with a rotated password, a bearer token or an OAuth2 token
// (the broker refusing the first credential each time, so that the retry
// path runs too) and checks that no password, token or client secret
// reaches the logs, the audit file, the spans, /metrics or an answer.
func TestNoBrokerTokenLeaks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(data+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	var issued atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if id, secret, _ := r.BasicAuth(); id != "gw" || secret != leakClientSecret {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("%s%d", leakOAuthToken, issued.Add(1)),
			"token_type": "Bearer", "expires_in": 3600})
	}))
	defer tokens.Close()
	for _, tc := range []struct {
		name, auth string
		accept     string // the Authorization the broker takes (not the gateway's first)
	}{
		{"rotation", "username: broker-user, password: " + leakBrokerPassword + ", next_password: " + leakNextPassword,
			"Basic " + basicAuth("broker-user", leakNextPassword)},
		{"bearer", "auth: {type: bearer, token_file: " + write("token", leakBearerToken) + "}", "Bearer " + leakBearerToken + "-2"},
		{"oauth2", "auth: {type: oauth2, token_url: \"" + tokens.URL + "/token\", client_id: gw, client_secret_file: " +
			write("secret", leakClientSecret) + "}", "Bearer " + leakOAuthToken + "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := samplebroker.New(samplebroker.Options{AsyncDelay: -1})
			sb.SetAuthorization(func(h string) bool { return h == tc.accept })
			broker := httptest.NewServer(sb)
			defer broker.Close()
			lg := startLeakGatewayAuth(t, broker.URL, "enforce", tc.auth)
			if tc.name == "bearer" {
				write("token", leakBearerToken+"-2") // the broker took the new token; the gateway holds the old
			}
			const inst, bind = "leak-instance-1", "leak-binding-1"
			ids := `"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanSyncID + `"`
			query := "?service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanSyncID
			var bodies []string
			for _, c := range []leakCall{
				{"provision", "PUT", "/v2/service_instances/" + inst, `{` + ids + `,"organization_guid":"o","space_guid":"s"}`, 201},
				{"bind", "PUT", "/v2/service_instances/" + inst + "/service_bindings/" + bind, `{` + ids + `}`, 201},
				{"unbind", "DELETE", "/v2/service_instances/" + inst + "/service_bindings/" + bind + query, "", 200},
				{"deprovision", "DELETE", "/v2/service_instances/" + inst + query, "", 200},
			} {
				bodies = append(bodies, lg.do(t, c))
			}
			// A broker that refuses everything: the gateway's 502 names no credential.
			sb.SetAuthorization(func(string) bool { return false })
			bodies = append(bodies, lg.do(t, leakCall{"refused provision", "PUT", "/v2/service_instances/leak-2",
				`{` + ids + `,"organization_guid":"o","space_guid":"s"}`, 502}))
			res, err := http.Get(lg.metrics)
			if err != nil {
				t.Fatal(err)
			}
			metrics, _ := io.ReadAll(res.Body)
			res.Body.Close()
			lg.stop()
			auditLog, err := os.ReadFile(lg.audit)
			if err != nil {
				t.Fatal(err)
			}
			sinks := map[string]string{"logs": lg.logs.String(), "audit log": string(auditLog), "spans": lg.spans.String(),
				"metrics": string(metrics), "answers": strings.Join(bodies, "\n")}
			if !strings.Contains(sinks["logs"], "broker refused") {
				t.Errorf("logs lack the refusal's line: did the retry path run?\n%s", sinks["logs"])
			}
			for name, text := range sinks {
				for _, secret := range []string{leakBrokerPassword, leakNextPassword, basicAuth("broker-user", leakNextPassword),
					basicAuth("broker-user", leakBrokerPassword), leakBearerToken, leakClientSecret, leakOAuthToken} {
					if i := strings.Index(text, secret); i >= 0 {
						t.Errorf("%s hold a secret: …%s…", name, excerpt(text, i, len(secret)))
					}
				}
			}
		})
	}
}
