package proxy

import (
	"net/http"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy/internal/auth"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

// BenchmarkStageAuth measures the auth stage on its hot path: a plain
// credential, and a bcrypt credential already verified (answered from the
// tenant's cache of verified credentials). Compare each row with
// BenchmarkStage/baseline.
func BenchmarkStageAuth(b *testing.B) {
	g := benchGateway(b)
	var up *upstream.Upstream
	for _, u := range g.upstreams {
		if u.Name == "b1" {
			up = u
		}
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(t1Pass), bcrypt.MinCost)
	if err != nil {
		b.Fatal(err)
	}
	tenants := []struct {
		name string
		cfg  *config.Tenant
	}{
		{"plain", &g.cfg.Tenants[0]},
		{"bcrypt verified", &config.Tenant{Name: "t1", Credentials: []config.Credential{{Username: t1User, Password: config.Secret(hash)}}}},
	}
	terminal := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, tc := range tenants {
		b.Run(tc.name, func(b *testing.B) {
			rt := newRoute("/t1/b1", mustTenant(b, tc.cfg), up)
			h := Stack(terminal, withScope(time.Now), prefillRoute(rt, "/v2/service_instances/i-1/last_operation"),
				auth.WithAuth(testAuthGate(b, config.Auth{}, time.Now)))
			benchServe(b, h, benchRequest("/t1/b1/v2/service_instances/i-1/last_operation?operation=op1"))
		})
	}
}
