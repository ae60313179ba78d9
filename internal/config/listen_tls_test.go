package config

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// defaultListenTLS is listen.tls after defaults, when the file has none.
var defaultListenTLS = ListenTLS{
	Mode:           DefaultTLSMode,
	ReloadInterval: DefaultTLSReloadInterval,
	MinVersion:     DefaultTLSMinVersion,
}

// tlsDoc is a one-tenant, one-broker file with listen.tls set to the
// given YAML flow mapping.
func tlsDoc(listenTLS string) string {
	return `listen: {address: ":8443", tls: ` + listenTLS + `}
tenants: [{name: t, credentials: [{username: u, password: p}], routes: [{broker: b}]}]
brokers: [{name: b, url: "https://b.example.com"}]
`
}

func TestListenTLSDefaults(t *testing.T) {
	tests := []struct {
		name string
		tls  string
		want ListenTLS
	}{
		{"off", `{}`, defaultListenTLS},
		{
			name: "acme without http_address answers tls-alpn-01 only",
			tls:  `{mode: acme, domains: [gw.example.com]}`,
			want: ListenTLS{Mode: TLSModeACME, Domains: []string{"gw.example.com"}, CA: DefaultACMECA,
				Challenges: []string{ChallengeTLSALPN01}, ReloadInterval: DefaultTLSReloadInterval, MinVersion: DefaultTLSMinVersion},
		},
		{
			name: "on_demand with http_address answers both",
			tls:  `{mode: on_demand, on_demand: {allow: ["*.example.com"]}, http_address: ":8080"}`,
			want: ListenTLS{Mode: TLSModeOnDemand, CA: DefaultACMECA, OnDemand: OnDemandTLS{Allow: []string{"*.example.com"}},
				Challenges: []string{ChallengeTLSALPN01, ChallengeHTTP01}, HTTPAddress: ":8080",
				ReloadInterval: DefaultTLSReloadInterval, MinVersion: DefaultTLSMinVersion},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tlsDoc(tc.tls)), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cfg.Listen.TLS); diff != "" {
				t.Errorf("listen.tls (-want +got):\n%s", diff)
			}
			if got := cfg.Tenants[0].ClientCert.Mode; got != ClientCertOff {
				t.Errorf("tenants[0].client_cert.mode = %q, want %q", got, ClientCertOff)
			}
			if got := cfg.Brokers[0].TLS.MinVersion; got != DefaultTLSMinVersion {
				t.Errorf("brokers[0].tls.min_version = %q, want %q", got, DefaultTLSMinVersion)
			}
		})
	}
}

// TestListenTLSProblems checks single problems; the golden files
// testdata/bad/listen-tls*.yaml and client-cert.yaml hold the rest.
func TestListenTLSProblems(t *testing.T) {
	tests := []struct {
		name string
		tls  string
		want string
	}{
		{"files without key", `{mode: files, cert_file: testdata/good/tls/gateway.crt}`,
			"listen.tls.key_file: is required when listen.tls.mode is files"},
		{"on_demand without allow", `{mode: on_demand}`,
			"listen.tls.on_demand.allow: is required when listen.tls.mode is on_demand: without it anyone could make the gateway request certificates"},
		{"wildcard with one label", `{mode: on_demand, on_demand: {allow: ["*.com"]}}`,
			`listen.tls.on_demand.allow[0]: "*.com": a wildcard must stand before at least two labels, as in *.example.com`},
		{"acme for an IP address", `{mode: acme, domains: ["192.0.2.7"]}`, ""},
		{"unknown mode", `{mode: manual}`, "listen.tls.mode: must be one of off, acme, on_demand, files"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tlsDoc(tc.tls)), Options{})
			var probs *Problems
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected problems:\n%v", err)
				}
				return
			}
			if !errors.As(err, &probs) {
				t.Fatalf("Parse = %v, want *Problems", err)
			}
			if got := lineless.ReplaceAllString(probs.Error(), ""); got != tc.want { // lines: the goldens test them
				t.Errorf("problems:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestParseSubject(t *testing.T) {
	tests := []struct {
		in      string
		want    []SubjectAttribute
		wantErr string
	}{
		{in: "CN=cloud-controller", want: []SubjectAttribute{{"CN", "cloud-controller"}}},
		{in: " cn = cc , O = cf-prod ", want: []SubjectAttribute{{"CN", "cc"}, {"O", "cf-prod"}}},
		{in: `O=Example\, Inc.,OU=a\\b`, want: []SubjectAttribute{{"O", "Example, Inc."}, {"OU", `a\b`}}},
		{in: "CN=a=b", want: []SubjectAttribute{{"CN", "a=b"}}},
		{in: "serialNumber=42,postalCode=10115", want: []SubjectAttribute{{"SERIALNUMBER", "42"}, {"POSTALCODE", "10115"}}},
		{in: "", wantErr: "is not a subject"},
		{in: "cloud-controller", wantErr: "is not a subject"},
		{in: "CN=", wantErr: "is not a subject"},
		{in: "CN=a,,O=b", wantErr: "is not a subject"},
		{in: "UID=42", wantErr: `unknown attribute type "UID"`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSubject(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseSubject(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseSubject(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// lineless matches the "(line N)" a problem's message ends with.
var lineless = regexp.MustCompile(`(?m) \(line \d+\)$`)
