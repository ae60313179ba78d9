package config

import (
	"net/url"
	"os"
	"strings"
)

// Outbound authentication types (brokers[].auth.type).
const (
	// BrokerAuthBasic is basic auth with username and password (and the
	// next credential during a rotation): what a broker gets without auth.
	BrokerAuthBasic = "basic"
	// BrokerAuthBearer sends "Authorization: Bearer" with the token read
	// from token_file.
	BrokerAuthBearer = "bearer"
	// BrokerAuthOAuth2 gets a token with the OAuth2 client-credentials
	// grant from token_url and sends it as a bearer token.
	BrokerAuthOAuth2 = "oauth2"
)

// BrokerAuth is brokers[].auth: how the gateway authenticates to the
// broker. Client certificates (brokers[].tls) apply whatever the type.
type BrokerAuth struct {
	// Type is basic, bearer or oauth2; zero value: basic.
	Type string `yaml:"type" validate:"omitempty,oneof=basic bearer oauth2"`
	// TokenFile (bearer) holds the token, trailing newline trimmed; it is
	// read again on reload and when the broker answers 401.
	TokenFile string `yaml:"token_file"`
	// TokenURL, ClientID, ClientSecretFile and Scopes (oauth2) are the
	// client-credentials grant's token endpoint, client and scopes.
	TokenURL         string   `yaml:"token_url"`
	ClientID         string   `yaml:"client_id"`
	ClientSecretFile string   `yaml:"client_secret_file"`
	Scopes           []string `yaml:"scopes"`
	// Token and ClientSecret are what TokenFile and ClientSecretFile held
	// when the configuration was read.
	Token        Secret `yaml:"-"`
	ClientSecret Secret `yaml:"-"`
}

// Kind is the auth type, BrokerAuthBasic when a is nil or its type unset.
func (a *BrokerAuth) Kind() string {
	if a == nil || a.Type == "" {
		return BrokerAuthBasic
	}
	return a.Type
}

// resolveBrokerAuth reads the broker's next password, token file and
// client secret file and checks that the keys of its auth type come
// together (and no others). path is "brokers[i]".
func resolveBrokerAuth(b *Broker, baseDir, path string, probs *Problems) {
	if b.NextPasswordFile != "" {
		if b.NextPassword != "" {
			probs.addf(path+".next_password_file", "cannot be set together with next_password; use one of them")
		} else if s, ok := readSecretFile(b.NextPasswordFile, baseDir, path+".next_password_file", probs); ok {
			b.NextPassword = Secret(s)
		}
	}
	next := b.NextPassword != "" || b.NextUsername != ""
	switch {
	case b.NextUsername != "" && b.NextPassword == "" && b.NextPasswordFile == "":
		probs.addf(path+".next_password", "is required when next_username is set (or set next_password_file)")
	case next && b.Username == "":
		probs.addf(path+".username", "is required with next_password: a rotation goes from one basic-auth credential (username and password) to the next")
	case hasBcryptPrefix(b.NextPassword.Reveal()):
		probs.addf(path+".next_password", "is a bcrypt hash, but the gateway must send the broker its real password")
	}
	a := b.Auth
	if a == nil {
		return
	}
	ap := path + ".auth"
	kind := a.Kind()
	if kind != BrokerAuthBasic && (b.Username != "" || next) {
		probs.addf(ap+".type", "is %s, which sends a token: drop the broker's username/password and next_* keys, or use type basic", kind)
	}
	only := func(key, value, of string) {
		if value != "" && kind != of {
			probs.addf(ap+"."+key, "is for auth type %s, not %s", of, kind)
		}
	}
	only("token_file", a.TokenFile, BrokerAuthBearer)
	only("token_url", a.TokenURL, BrokerAuthOAuth2)
	only("client_id", a.ClientID, BrokerAuthOAuth2)
	only("client_secret_file", a.ClientSecretFile, BrokerAuthOAuth2)
	if len(a.Scopes) > 0 && kind != BrokerAuthOAuth2 {
		probs.addf(ap+".scopes", "is for auth type %s, not %s", BrokerAuthOAuth2, kind)
	}
	switch kind {
	case BrokerAuthBearer:
		if a.TokenFile == "" {
			probs.addf(ap+".token_file", "is required with auth type bearer (a file holding the token)")
		} else if s, ok := readSecretFile(a.TokenFile, baseDir, ap+".token_file", probs); ok {
			a.TokenFile, a.Token = resolvePath(baseDir, a.TokenFile), Secret(s)
		}
	case BrokerAuthOAuth2:
		if a.TokenURL == "" {
			probs.addf(ap+".token_url", "is required with auth type oauth2 (the token endpoint of the client-credentials grant)")
		} else if u, err := url.Parse(a.TokenURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			probs.addf(ap+".token_url", "must be an absolute http or https URL")
		} else if u.User != nil {
			probs.addf(ap+".token_url", "must not hold credentials; put them in client_id and client_secret_file")
		}
		if a.ClientID == "" {
			probs.addf(ap+".client_id", "is required with auth type oauth2")
		}
		if a.ClientSecretFile == "" {
			probs.addf(ap+".client_secret_file", "is required with auth type oauth2 (a file holding the client secret)")
		} else if s, ok := readSecretFile(a.ClientSecretFile, baseDir, ap+".client_secret_file", probs); ok {
			a.ClientSecretFile, a.ClientSecret = resolvePath(baseDir, a.ClientSecretFile), Secret(s)
		}
	}
}

// readSecretFile reads a secret from file (relative to baseDir), trailing
// newlines trimmed, or records why it cannot at key.
func readSecretFile(file, baseDir, key string, probs *Problems) (string, bool) {
	data, err := os.ReadFile(resolvePath(baseDir, file))
	if err != nil {
		probs.addf(key, "cannot read %q: %s", file, fileError(err))
		return "", false
	}
	s := strings.TrimRight(string(data), "\r\n")
	if s == "" {
		probs.addf(key, "%q is empty", file)
		return "", false
	}
	return s, true
}
