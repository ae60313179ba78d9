package e2e

import (
	"testing"

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

// The rows of the broker's outbound authentication (proxy/brokerauth.go):
// whatever goes wrong with the gateway's credentials, the platform gets
// the gateway's own OSB error, never the broker's 401, and nothing is
// left locked or orphaned, since the broker did nothing.
func init() { faultTable = append(faultTable, authRows...) }

var authRows = []faultRow{
	{
		// The OAuth2 token endpoint refuses connections: no token, so the
		// call is not sent at all; the platform learns why, naming the
		// token endpoint.
		name: "auth: the OAuth2 token endpoint is down",
		opts: faultOptions{brokerAuth: func(t *testing.T, b *config.Broker) {
			b.Username, b.Password = "", ""
			b.Auth = &config.BrokerAuth{Type: config.BrokerAuthOAuth2, TokenURL: "http://" + refusingAddr(t) + "/oauth/token",
				ClientID: "gateway", ClientSecret: "client-s3cret"}
		}},
		steps: []faultStep{
			{call: provision, want: state{saw: saw{503, "could not get an OAuth2 token for it from the token endpoint http://"}}},
			{call: bind, want: state{saw: saw{503, "which could not be reached"}}},
		},
		mitigated: &state{}, // no orphan: nothing was sent
		retried:   []faultStep{{call: provision, want: state{saw: saw{503, "token endpoint"}}}},
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
