package config

import (
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Listener TLS modes, the values of listen.tls.mode.
const (
	TLSModeOff      = "off"       // plain HTTP
	TLSModeACME     = "acme"      // certificates for domains from an ACME CA, obtained at start
	TLSModeOnDemand = "on_demand" // certificates from an ACME CA, obtained at a name's first handshake
	TLSModeFiles    = "files"     // a certificate and key from PEM files, re-read when they change
)

// ACME challenge types, the values of listen.tls.challenges.
const (
	ChallengeHTTP01    = "http-01"     // answered on listen.tls.http_address
	ChallengeTLSALPN01 = "tls-alpn-01" // answered on listen.address itself
)

// Client certificate modes, the values of tenants[].client_cert.mode.
const (
	ClientCertOff        = "off"        // certificates are not looked at; the password decides
	ClientCertOptional   = "optional"   // the password decides; a certificate, if sent, must match too
	ClientCertRequired   = "required"   // a matching certificate and the password
	ClientCertSufficient = "sufficient" // a matching certificate, or else the password
)

// Defaults for listen.tls, brokers[].tls and tenants[].client_cert,
// applied by Load before validation.
const (
	DefaultTLSMode           = TLSModeOff                                       // listen.tls.mode
	DefaultACMECA            = "https://acme-v02.api.letsencrypt.org/directory" // listen.tls.ca (Let's Encrypt)
	DefaultTLSReloadInterval = 5 * time.Second                                  // listen.tls.reload_interval
	DefaultTLSMinVersion     = "1.2"                                            // listen.tls.min_version, brokers[].tls.min_version
	DefaultClientCertMode    = ClientCertOff                                    // tenants[].client_cert.mode
)

// ListenTLS is TLS at the platform listener (listen.tls). Fields that do
// not apply to the mode must stay unset.
type ListenTLS struct {
	// Mode is how the listener gets its certificate: off, acme, on_demand
	// or files. Zero value: DefaultTLSMode, plain HTTP.
	Mode string `yaml:"mode" validate:"oneof=off acme on_demand files"`
	// Domains are host names. acme: the names to obtain certificates for
	// (required; no wildcards). on_demand: allowed besides on_demand.allow.
	// files: the names the certificate must cover, checked by
	// "osb-gateway check".
	Domains []string `yaml:"domains"`

	// CA is the ACME directory URL (acme, on_demand); naming a CA accepts
	// its subscriber agreement. Zero value: DefaultACMECA.
	CA string `yaml:"ca"`
	// CARoot is a PEM file of roots that the CA's own HTTPS certificate
	// must chain to, for a private ACME server; empty: the system roots.
	CARoot string `yaml:"ca_root"`
	// Email is the ACME account's contact; empty: an account without one.
	Email string `yaml:"email"`
	// Storage is the directory holding the ACME account, keys and
	// certificates; replicas may share it. Empty: certmagic's default,
	// $XDG_DATA_HOME/certmagic or $HOME/.local/share/certmagic.
	Storage string `yaml:"storage"`
	// Challenges are the ACME challenge types answered: "tls-alpn-01" on
	// listen.address, "http-01" on http_address. Zero value: both when
	// http_address is set, else tls-alpn-01.
	Challenges []string `yaml:"challenges" validate:"dive,oneof=http-01 tls-alpn-01"`
	// OnDemand lists the names that may get a certificate at their first
	// handshake (on_demand).
	OnDemand OnDemandTLS `yaml:"on_demand"`

	// CertFile and KeyFile are the PEM certificate chain and private key
	// (files). Both are re-read when either changes and on SIGHUP.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ReloadInterval is how often the files' modification times are
	// polled. Zero value: DefaultTLSReloadInterval.
	ReloadInterval time.Duration `yaml:"reload_interval" validate:"gte=100ms"`

	// HTTPAddress, when set, is a plain-HTTP host:port that answers ACME
	// HTTP-01 challenges and redirects every other request to HTTPS (308).
	HTTPAddress string `yaml:"http_address" validate:"omitempty,hostport"`
	// HTTPSPort is the port the redirects point to; 443 is left out of
	// the URL. Zero value: the port of listen.address.
	HTTPSPort int `yaml:"https_port" validate:"gte=0,lte=65535"`
	// ClientCAFile is a PEM bundle of the CAs that issue client
	// certificates. When set, the listener asks for a certificate and
	// verifies one if sent; tenants[].client_cert decides what it is worth.
	ClientCAFile string `yaml:"client_ca_file"`
	// MinVersion is the lowest TLS version accepted: "1.2" or "1.3". Zero
	// value: DefaultTLSMinVersion.
	MinVersion string `yaml:"min_version" validate:"oneof=1.2 1.3"`
}

// OnDemandTLS is listen.tls.on_demand.
type OnDemandTLS struct {
	// Allow holds host names, exact ("gw.example.com") or with a wildcard
	// first label ("*.example.com" matches "a.example.com", not
	// "a.b.example.com"). A handshake for any other name fails.
	Allow []string `yaml:"allow"`
}

// acme reports whether the mode gets certificates from an ACME CA.
func (t *ListenTLS) acme() bool { return t.Mode == TLSModeACME || t.Mode == TLSModeOnDemand }

// ClientCert is how a tenant uses client certificates
// (tenants[].client_cert). A certificate matches when it was verified
// against listen.tls.client_ca_file and fits one of Subjects (if any) and
// one of SANs (if any).
type ClientCert struct {
	// Mode is off, optional, required or sufficient. Zero value:
	// DefaultClientCertMode.
	Mode string `yaml:"mode" validate:"oneof=off optional required sufficient"`
	// Subjects are subject patterns such as "CN=cloud-controller,O=cf-prod"
	// (see ParseSubject); a subject fits when it has every attribute named.
	Subjects []string `yaml:"subjects"`
	// SANs are subject alternative names: DNS names (a wildcard first
	// label allowed), email addresses, URIs (such as SPIFFE IDs) or IP
	// addresses; a certificate fits when one of its SANs equals one.
	SANs []string `yaml:"sans"`
}

// applyTLSDefaults fills the TLS defaults of listen.tls, brokers[].tls and
// tenants[].client_cert. ACME defaults are filled only in ACME modes, so
// that a stray key in another mode is reported.
func applyTLSDefaults(c *Config) {
	t := &c.Listen.TLS
	if t.Mode == "" {
		t.Mode = DefaultTLSMode
	}
	if t.MinVersion == "" {
		t.MinVersion = DefaultTLSMinVersion
	}
	setDuration(&t.ReloadInterval, DefaultTLSReloadInterval)
	if t.acme() {
		if t.CA == "" {
			t.CA = DefaultACMECA
		}
		if t.Challenges == nil {
			t.Challenges = []string{ChallengeTLSALPN01}
			if t.HTTPAddress != "" {
				t.Challenges = append(t.Challenges, ChallengeHTTP01)
			}
		}
	}
	for i := range c.Brokers {
		if c.Brokers[i].TLS.MinVersion == "" {
			c.Brokers[i].TLS.MinVersion = DefaultTLSMinVersion
		}
	}
	for i := range c.Tenants {
		if c.Tenants[i].ClientCert.Mode == "" {
			c.Tenants[i].ClientCert.Mode = DefaultClientCertMode
		}
	}
}

// resolveListenTLSFiles makes the listen.tls file and directory names
// relative to baseDir and checks that each file can be read.
func resolveListenTLSFiles(t *ListenTLS, baseDir string, probs *Problems) {
	for _, f := range []struct {
		key  string
		name *string
	}{{"cert_file", &t.CertFile}, {"key_file", &t.KeyFile}, {"client_ca_file", &t.ClientCAFile}, {"ca_root", &t.CARoot}} {
		if *f.name == "" {
			continue
		}
		resolved := resolvePath(baseDir, *f.name)
		if err := checkReadable(resolved); err != nil {
			probs.addf("listen.tls."+f.key, "cannot read %q: %s", *f.name, fileError(err))
			continue
		}
		*f.name = resolved
	}
	if t.Storage != "" {
		t.Storage = resolvePath(baseDir, t.Storage)
	}
}

// checkTLS runs the TLS checks that span fields: what each listener mode
// needs and forbids, host names and patterns, and tenants' client
// certificate rules.
func checkTLS(c *Config, probs *Problems) {
	t := &c.Listen.TLS
	const p = "listen.tls."
	checkModeKeys(t, probs)
	checkHostList(t.Domains, p+"domains", t.Mode == TLSModeFiles, probs)
	checkHostList(t.OnDemand.Allow, p+"on_demand.allow", true, probs)
	checkACME(t, probs)
	if t.HTTPAddress != "" && t.HTTPAddress == c.Listen.Address && !strings.HasSuffix(t.HTTPAddress, ":0") {
		probs.addf(p+"http_address", "is also listen.address; the HTTP listener needs an address of its own")
	}
	checkClientCerts(c, probs)
}

// checkModeKeys checks that listen.tls has the keys its mode needs and
// none that other modes use.
func checkModeKeys(t *ListenTLS, probs *Problems) {
	const p = "listen.tls."
	set := func(key string, isSet bool, need string) {
		if isSet {
			probs.addf(p+key, "applies only when listen.tls.mode is %s (it is %s)", need, t.Mode)
		}
	}
	if !t.acme() {
		set("ca", t.CA != "", "acme or on_demand")
		set("ca_root", t.CARoot != "", "acme or on_demand")
		set("email", t.Email != "", "acme or on_demand")
		set("storage", t.Storage != "", "acme or on_demand")
		set("challenges", t.Challenges != nil, "acme or on_demand")
	}
	if t.Mode != TLSModeOnDemand {
		set("on_demand.allow", len(t.OnDemand.Allow) > 0, "on_demand")
	}
	if t.Mode != TLSModeFiles {
		set("cert_file", t.CertFile != "", "files")
		set("key_file", t.KeyFile != "", "files")
	}
	if t.Mode == TLSModeOff {
		const tlsModes = "acme, on_demand or files"
		set("domains", len(t.Domains) > 0, tlsModes)
		set("http_address", t.HTTPAddress != "", tlsModes)
		set("https_port", t.HTTPSPort != 0, tlsModes)
		set("client_ca_file", t.ClientCAFile != "", tlsModes)
	}
	switch t.Mode {
	case TLSModeACME:
		if len(t.Domains) == 0 {
			probs.addf(p+"domains", "is required when listen.tls.mode is acme")
		}
	case TLSModeOnDemand:
		if len(t.OnDemand.Allow) == 0 {
			probs.addf(p+"on_demand.allow", "is required when listen.tls.mode is on_demand: without it anyone could make the gateway request certificates")
		}
	case TLSModeFiles:
		for _, k := range []struct{ key, val string }{{"cert_file", t.CertFile}, {"key_file", t.KeyFile}} {
			if k.val == "" {
				probs.addf(p+k.key, "is required when listen.tls.mode is files")
			}
		}
	}
}

// checkACME checks the ACME settings' values.
func checkACME(t *ListenTLS, probs *Problems) {
	const p = "listen.tls."
	if t.CA != "" {
		if u, err := url.Parse(t.CA); err != nil || u.Scheme != "https" || u.Host == "" {
			probs.addf(p+"ca", "must be an ACME directory https URL such as %q", DefaultACMECA)
		}
	}
	if t.Email != "" {
		if a, err := mail.ParseAddress(t.Email); err != nil || a.Name != "" || a.Address != t.Email {
			probs.addf(p+"email", "must be a bare email address such as ops@example.com")
		}
	}
	if slices.Contains(t.Challenges, ChallengeHTTP01) && t.HTTPAddress == "" {
		probs.addf(p+"challenges", "http-01 needs listen.tls.http_address, the port-80 listener that answers it")
	}
}

// checkHostList checks a list of host names for validity and duplicates;
// wildcard allows a "*." first label.
func checkHostList(names []string, path string, wildcard bool, probs *Problems) {
	seen := make(map[string]int)
	for i, name := range names {
		at := joinIndex(path, i)
		host, isWild := strings.CutPrefix(name, "*.")
		switch {
		case isWild && !wildcard:
			probs.addf(at, "%q: wildcard certificates need the DNS-01 challenge, which the gateway does not answer; list each name, or use mode on_demand with a *. pattern", name)
			continue
		case host == "" || !(validHostname(host) || !isWild && isIPAddr(host)) || strings.HasSuffix(host, "."):
			probs.addf(at, "%q is not a host name such as gw.example.com", name)
			continue
		case isWild && !strings.Contains(host, "."):
			probs.addf(at, "%q: a wildcard must stand before at least two labels, as in *.example.com", name)
			continue
		}
		key := strings.ToLower(name)
		if first, dup := seen[key]; dup {
			probs.addf(at, "%q is already %s", name, joinIndex(path, first))
			continue
		}
		seen[key] = i
	}
}

// checkClientCerts checks each tenant's client_cert against its mode and
// the listener.
func checkClientCerts(c *Config, probs *Problems) {
	for i, tn := range c.Tenants {
		cc := tn.ClientCert
		path := joinIndex("tenants", i) + ".client_cert"
		if cc.Mode == ClientCertOff {
			if len(cc.Subjects)+len(cc.SANs) > 0 {
				probs.addf(path+".mode", "is off, so subjects and sans are not used; set optional, required or sufficient")
			}
			continue
		}
		if c.Listen.TLS.ClientCAFile == "" {
			probs.addf(path+".mode", "%s needs listen.tls.client_ca_file, the CAs that client certificates are verified against", cc.Mode)
		}
		if len(cc.Subjects)+len(cc.SANs) == 0 {
			probs.addf(path, "needs subjects or sans: otherwise any certificate from the client CAs, another tenant's too, would match")
		}
		for j, s := range cc.Subjects {
			if _, err := ParseSubject(s); err != nil {
				probs.addf(joinIndex(path+".subjects", j), "%v", err)
			}
		}
		for j, s := range cc.SANs {
			if strings.TrimSpace(s) == "" || strings.TrimSpace(s) != s {
				probs.addf(joinIndex(path+".sans", j), "must be a DNS name, email address, URI or IP address without spaces around it")
			}
		}
	}
}

// SubjectAttribute is one "TYPE=value" of a subject pattern.
type SubjectAttribute struct {
	// Type is the attribute in upper case: CN, O, OU, C, L, ST, STREET,
	// POSTALCODE or SERIALNUMBER.
	Type  string
	Value string
}

// subjectTypes are the attribute types a subject pattern may name.
var subjectTypes = []string{"CN", "O", "OU", "C", "L", "ST", "STREET", "POSTALCODE", "SERIALNUMBER"}

// ParseSubject parses a subject pattern: comma-separated TYPE=value
// attributes, such as "CN=cloud-controller,O=cf-prod". Types are case
// insensitive (see SubjectAttribute); values are compared exactly, and a
// comma or backslash inside one is escaped with a backslash. Spaces
// around attributes are ignored.
func ParseSubject(s string) ([]SubjectAttribute, error) {
	var attrs []SubjectAttribute
	for _, part := range splitEscaped(s) {
		typ, val, ok := strings.Cut(part, "=")
		typ, val = strings.ToUpper(strings.TrimSpace(typ)), strings.TrimSpace(val)
		switch {
		case !ok || typ == "" || val == "":
			return nil, fmt.Errorf("%q is not a subject such as \"CN=cloud-controller,O=cf-prod\" (TYPE=value, comma-separated)", s)
		case !slices.Contains(subjectTypes, typ):
			return nil, fmt.Errorf("%q: unknown attribute type %q (use %s)", s, typ, strings.Join(subjectTypes, ", "))
		}
		attrs = append(attrs, SubjectAttribute{Type: typ, Value: val})
	}
	return attrs, nil
}

// splitEscaped splits s at commas not escaped by a backslash and removes
// the escapes.
func splitEscaped(s string) []string {
	var parts []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case s[i] == ',':
			parts = append(parts, b.String())
			b.Reset()
		default:
			b.WriteByte(s[i])
		}
	}
	return append(parts, b.String())
}
