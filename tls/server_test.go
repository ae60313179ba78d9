package tls

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// TestRedirect requests the HTTP listener's handler over a real
// connection: everything but ACME challenges goes to HTTPS with 308.
func TestRedirect(t *testing.T) {
	tests := []struct {
		name      string
		httpsPort int // listen.tls.https_port; 0: the listener's port, 8443
		method    string
		host      string
		target    string
		wantCode  int
		wantLoc   string
	}{
		{"GET keeps path and query", 0, "GET", "gw.example.com", "/cf/mysql/v2/catalog?x=1", 308, "https://gw.example.com:8443/cf/mysql/v2/catalog?x=1"},
		{"PUT keeps its method under 308", 0, "PUT", "gw.example.com:8080", "/cf/mysql/v2/service_instances/1", 308, "https://gw.example.com:8443/cf/mysql/v2/service_instances/1"},
		{"port 443 left out", 443, "GET", "gw.example.com:80", "/", 308, "https://gw.example.com/"},
		{"https_port wins", 9443, "GET", "gw.example.com", "/", 308, "https://gw.example.com:9443/"},
		{"IPv6 literal", 443, "GET", "[2001:db8::1]:80", "/", 308, "https://[2001:db8::1]/"},
		{"unanswered ACME challenge path is redirected too", 0, "GET", "gw.example.com", "/.well-known/acme-challenge/abc", 308,
			"https://gw.example.com:8443/.well-known/acme-challenge/abc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewServer(config.ListenTLS{Mode: config.TLSModeACME, Domains: []string{"gw.example.com"}, CA: "https://127.0.0.1:1/dir",
				Storage: t.TempDir(), Challenges: []string{config.ChallengeHTTP01}, HTTPAddress: "127.0.0.1:0", HTTPSPort: tc.httpsPort},
				"127.0.0.1:8443", Options{Logger: quietLog})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if tc.httpsPort == 0 {
				s.httpsPort.Store(8443) // as Wrap records the listener's port
			}
			srv := httptest.NewServer(s.HTTPHandler())
			defer srv.Close()
			req, _ := http.NewRequest(tc.method, srv.URL+tc.target, nil)
			req.Host = tc.host
			res, err := srv.Client().Transport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.wantCode || res.Header.Get("Location") != tc.wantLoc {
				t.Errorf("got %d Location %q, want %d %q", res.StatusCode, res.Header.Get("Location"), tc.wantCode, tc.wantLoc)
			}
		})
	}
	t.Run("no Host", func(t *testing.T) {
		s := &Server{}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Host = ""
		s.HTTPHandler().ServeHTTP(rec, req)
		want := `{"description":"a Host header is required to redirect to HTTPS: expected the gateway's host name, got none"}` + "\n"
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != want {
			t.Errorf("got %d %s %q, want 400 application/json %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String(), want)
		}
	})
}
