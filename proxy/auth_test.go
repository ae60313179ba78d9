package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/auth"
)

func TestAuth(t *testing.T) {
	gw, b1, _ := twoTenants(t)
	url := gw.URL + "/t1/b1/v2/service_instances/x/last_operation"
	tests := []struct {
		name   string
		header string // raw Authorization value; "" sends none
		status int
		golden string
	}{
		{"current credential", basic(t1User, t1Pass), 200, ""},
		{"older credential still valid for rotation", basic("old-user", "old-pass"), 200, ""},
		{"no header", "", 401, "auth_missing"},
		{"bearer scheme", "Bearer abc", 401, "auth_other_scheme"},
		{"wrong password", basic(t1User, "nope"), 401, "auth_wrong"},
		{"password of the other credential", basic(t1User, "old-pass"), 401, ""},
		{"other tenant's credential", basic(t2User, t2Pass), 401, ""},
		{"broker's credential", basic(brokerUser, brokerPass), 401, ""},
		{"empty password", basic(t1User, ""), 401, ""},
		{"malformed base64", "Basic !!!", 401, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := len(b1.Requests())
			req, _ := http.NewRequest("GET", url, nil)
			req.Header.Set("X-Broker-API-Version", "2.14")
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			res, body := send(t, req)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			reached := len(b1.Requests()) > n
			if reached != (tc.status == 200) {
				t.Errorf("broker reached = %v for status %d", reached, tc.status)
			}
			if tc.status == 401 {
				if got := res.Header.Get("WWW-Authenticate"); got != `Basic realm="osb-gateway"` {
					t.Errorf("WWW-Authenticate = %q", got)
				}
				if !strings.HasPrefix(body, `{"description":`) {
					t.Errorf("401 body is not an OSB error: %s", body)
				}
			}
			if tc.golden != "" {
				checkGolden(t, tc.golden, res, body)
			}
		})
	}
}

func TestAuthBcrypt(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("hashed-pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	tn := mustTenant(t, &config.Tenant{Name: "t", Credentials: []config.Credential{
		{Username: "plain", Password: "plain-pass"},
		{Username: "hashed", Password: config.Secret(hash)},
	}})
	g := testAuthGate(t, config.Auth{}, time.Now)
	for _, tc := range []struct {
		user, pass string
		want       bool
	}{
		{"hashed", "hashed-pass", true},
		{"hashed", "hashed-pass", true}, // second time from the cache
		{"hashed", "wrong", false},
		{"plain", "hashed-pass", false},
		{"plain", "plain-pass", true},
		{"hashed", "plain-pass", false},
		{"plai", "nplain-pass", false}, // same bytes, split elsewhere: the digest keeps them apart
		{"hashe", "dhashed-pass", false},
	} {
		if _, err := tn.Verify(context.Background(), g, testAddr, []byte(tc.user), []byte(tc.pass)); (err == nil) != tc.want {
			t.Errorf("verify(%q, %q) = %v, want valid %v", tc.user, tc.pass, err, tc.want)
		}
	}
	if n := tn.Verified(); n != 2 {
		t.Errorf("verified cache holds %d entries, want 2 (successes only, one per credential)", n)
	}
}

func basic(user, pass string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, pass)
	return r.Header.Get("Authorization")
}

func send(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// mustTenant is newTenant for a tenant the test knows to be valid.
func mustTenant(tb testing.TB, tc *config.Tenant) *auth.Tenant {
	tb.Helper()
	tn, err := auth.NewTenant(tc)
	if err != nil {
		tb.Fatal(err)
	}
	return tn
}

// New used to drop the error of the tenant's client-certificate rule and
// of a bcrypt hash's cost, relying on config validation: a configuration
// changed after validation was served with no subject rule (every verified
// certificate accepted) or a dummy hash of cost 0. It is refused now.
func TestNewRefusesTenantsValidationWouldRefuse(t *testing.T) {
	tests := []struct {
		name   string
		change func(*config.Tenant)
		want   string
	}{
		{"client_cert subject not parsable", func(tc *config.Tenant) {
			tc.ClientCert = config.ClientCert{Mode: config.ClientCertRequired, Subjects: []string{"cloud-controller"}}
		}, `tenant "t1": client_cert: "cloud-controller" is not a subject`},
		{"bcrypt prefix without a hash", func(tc *config.Tenant) {
			tc.Credentials[0].Password = "$2a$not-a-hash"
		}, `tenant "t1": credentials[0].password is not a bcrypt hash`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := osbtest.NewBroker(t, nil)
			cfg, err := config.Parse([]byte(twoTenantYAML), config.Options{LookupEnv: func(k string) (string, bool) {
				v, ok := env(b.URL, b.URL)[k]
				return v, ok
			}})
			if err != nil {
				t.Fatal(err)
			}
			tc.change(&cfg.Tenants[0])
			g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				g.Close(nil)
				t.Fatalf("New accepted the tenant; want an error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "not-a-hash") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}
