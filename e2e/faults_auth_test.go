package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

var catalogCall = platformCall{"catalog", samplebroker.EndpointCatalog, func(c osb.Client, _ string) error {
	_, err := c.GetCatalog()
	return err
}}

// rotateBrokerPassword makes the sample broker accept only password.
func rotateBrokerPassword(password string) func(*testing.T, *faultEnv) {
	return func(t *testing.T, f *faultEnv) { f.broker.SetCredentials(sampleUser, password) }
}

// The rows of the broker's outbound authentication (proxy/internal/upstream/brokerauth.go):
// whatever goes wrong with the gateway's credentials, the platform gets
// the gateway's own OSB error, never the broker's 401, and nothing is
// left locked or orphaned, since the broker did nothing.
func init() { faultTable = append(faultTable, authRows...) }

var authRows = []faultRow{
	{
		// The OAuth2 token endpoint refuses connections from the start: no
		// token, so no catalog either, and the provision and bind are
		// refused for want of it (without_catalog: refuse); the platform
		// learns why, never where the endpoint is.
		name: "auth: the OAuth2 token endpoint is down",
		opts: faultOptions{brokerAuth: func(t *testing.T, b *config.Broker) {
			b.Username, b.Password = "", ""
			b.Auth = &config.BrokerAuth{Type: config.BrokerAuthOAuth2, TokenURL: "http://" + refusingAddr(t) + "/oauth/token",
				ClientID: "gateway", ClientSecret: "client-s3cret"}
		}},
		steps: []faultStep{
			{call: provision, after: tokenEndpointWithheld,
				want: state{saw: saw{503, `the catalog of broker "b" is unavailable (none is cached): the broker was not called: its OAuth2 token endpoint could not be reached: it refused the connection`}}},
			{call: bind, after: tokenEndpointWithheld, want: state{saw: saw{503, "its OAuth2 token endpoint could not be reached"}}},
		},
		mitigated: &state{}, // no orphan: nothing was sent
		retried:   []faultStep{{call: provision, want: state{saw: saw{503, "its OAuth2 token endpoint could not be reached"}}}},
	},
	{
		// The token endpoint hangs once the catalog is cached (it answered
		// the catalog's fetch with a token that needs renewing at once):
		// the provision waits for a token within the broker's timeout,
		// then gets 429, not a 5xx: the broker was never called, so there
		// is nothing to lock, settle or undo, and a 4xx sets off no
		// platform DELETE. A read gets 504. Neither names the endpoint.
		name: "auth: the OAuth2 token endpoint hangs",
		opts: faultOptions{timeout: 500 * time.Millisecond, brokerAuth: func(t *testing.T, b *config.Broker) {
			b.Username, b.Password = "", ""
			b.Auth = &config.BrokerAuth{Type: config.BrokerAuthOAuth2, TokenURL: hangingTokenEndpoint(t) + "/oauth/token",
				ClientID: "gateway", ClientSecret: "client-s3cret"}
		}},
		steps: []faultStep{
			{call: catalogCall, arm: acceptBearer, want: state{saw: saw{200, ""}}},
			{call: provision, after: tokenEndpointWithheld,
				want: state{saw: saw{429, `broker "b" was not called: its OAuth2 token endpoint did not answer within 500ms`}}},
			{call: poll, after: tokenEndpointWithheld,
				want: state{saw: saw{504, `broker "b" was not called: its OAuth2 token endpoint did not answer within 500ms`}}},
		},
		mitigated: &state{}, // no orphan: nothing was sent
		retried: []faultStep{{call: provision,
			want: state{saw: saw{429, "its OAuth2 token endpoint did not answer within 500ms"}}}},
	},
	{
		// Both of the broker's credentials are wrong (the broker was
		// rotated to a password the gateway was never given): the broker
		// refuses each with 401, before acting, and the platform gets a
		// 502 that says so.
		name: "auth: the broker refuses both credentials",
		opts: faultOptions{brokerAuth: func(t *testing.T, b *config.Broker) { b.NextPassword = "sample-n3xt" }},
		steps: []faultStep{
			{call: catalogCall, want: state{saw: saw{200, ""}, calls: calls{}}},
			{call: provision, arm: rotateBrokerPassword("neither-of-them"),
				want: state{saw: saw{502, `broker "b" refused both credentials the gateway holds for it`},
					calls: calls{"provision": 2}}},
			{call: bind, want: state{saw: saw{502, "refused both credentials"}, calls: calls{"provision": 2, "bind": 2}}},
		},
		mitigated: &state{calls: calls{"provision": 2, "bind": 2}}, // no orphan: the broker did nothing
		retried: []faultStep{{call: provision, want: state{saw: saw{502, "refused both credentials"},
			calls: calls{"provision": 4, "bind": 2}}}},
	},
	{
		// The broker rotates to the next password between two calls: the
		// platform sees nothing of it.
		name: "auth: the broker rotates to the next password",
		opts: faultOptions{brokerAuth: func(t *testing.T, b *config.Broker) { b.NextPassword = "sample-n3xt" }},
		steps: []faultStep{
			{call: provision, want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}},
			{call: bind, arm: rotateBrokerPassword("sample-n3xt"),
				want: state{saw: saw{201, ""}, calls: calls{"provision": 1, "bind": 2}}},
		},
		mitigated: &state{calls: calls{"provision": 1, "bind": 2}},
		retried: []faultStep{{call: deprovision, want: state{saw: saw{200, ""},
			calls: calls{"provision": 1, "bind": 2, "deprovision": 1}}}},
	},
}

// hangingTokenEndpoint is the URL of an OAuth2 token endpoint that answers
// its first request with a token expiring within oauth2's expiry delta
// (so that every later call needs a new one) and holds every later
// request until the gateway hangs up.
func hangingTokenEndpoint(t *testing.T) string {
	t.Helper()
	var n atomic.Int32
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm() // the body read, r.Context ends when the gateway hangs up
		if n.Add(1) > 1 {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"tok-1","token_type":"Bearer","expires_in":5}`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // first
	return srv.URL
}

// acceptBearer makes the sample broker accept any bearer token.
func acceptBearer(t *testing.T, f *faultEnv) {
	f.broker.SetAuthorization(func(h string) bool { return strings.HasPrefix(h, "Bearer ") })
}

// tokenEndpointWithheld checks, after a step, that the platform's last
// answer names no address (the token endpoint's is on loopback).
func tokenEndpointWithheld(t *testing.T, f *faultEnv) {
	t.Helper()
	body := f.platforms[0].last(t).Body
	for _, leak := range []string{"127.0.0.1", "/oauth/token", "http://", "dial tcp"} {
		if strings.Contains(body, leak) {
			t.Errorf("the platform's answer holds %q: %s", leak, body)
		}
	}
}
