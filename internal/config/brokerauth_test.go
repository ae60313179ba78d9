package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrokerAuthKeys: the next credential and the auth types load, their
// files are read, and each wrong combination is refused with a problem at
// its key that says what was expected.
func TestBrokerAuthKeys(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"next": "next-s3cret\n", "token": "tok-1\n", "secret": "client-s3cret\n", "empty": "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const tenants = "tenants: [{name: t, credentials: [{username: u, password: p}], routes: [{broker: b}]}]\n"
	parse := func(broker string) (*Config, error) {
		return Parse([]byte(tenants+"brokers: [{name: b, url: \"http://b\", "+broker+"}]\n"), Options{BaseDir: dir})
	}
	good := []struct {
		name, yaml string
		check      func(b Broker) bool
	}{
		{"next password", "username: u, password: cur, next_password: nxt", func(b Broker) bool {
			return b.NextPassword == "nxt" && b.NextUsername == "" && b.Auth.Kind() == BrokerAuthBasic
		}},
		{"next password file", "username: u, password: cur, next_username: u2, next_password_file: next", func(b Broker) bool {
			return b.NextPassword == "next-s3cret" && b.NextUsername == "u2"
		}},
		{"bearer", "auth: {type: bearer, token_file: token}", func(b Broker) bool {
			return b.Auth.Token == "tok-1" && b.Auth.TokenFile == filepath.Join(dir, "token")
		}},
		{"oauth2", "auth: {type: oauth2, token_url: \"https://uaa/oauth/token\", client_id: gw, client_secret_file: secret, scopes: [a, b]}", func(b Broker) bool {
			return b.Auth.ClientSecret == "client-s3cret" && b.Auth.ClientID == "gw" && len(b.Auth.Scopes) == 2
		}},
		{"basic", "auth: {type: basic}, username: u, password: p", func(b Broker) bool { return b.Auth.Kind() == BrokerAuthBasic }},
	}
	for _, tc := range good {
		cfg, err := parse(tc.yaml)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !tc.check(cfg.Brokers[0]) {
			t.Errorf("%s: got %+v", tc.name, cfg.Brokers[0])
		}
	}
	bad := []struct{ name, yaml, key, want string }{
		{"next_password and its file", "username: u, password: p, next_password: x, next_password_file: next", "brokers[0].next_password_file", "cannot be set together with next_password"},
		{"next file missing", "username: u, password: p, next_password_file: nope", "brokers[0].next_password_file", `cannot read "nope"`},
		{"next file empty", "username: u, password: p, next_password_file: empty", "brokers[0].next_password_file", "is empty"},
		{"next username alone", "username: u, password: p, next_username: v", "brokers[0].next_password", "is required when next_username is set"},
		{"next without a user", "next_password: x", "brokers[0].username", "is required with next_password"},
		{"next bcrypt", "username: u, password: p, next_password: \"" + goodHash + "\"", "brokers[0].next_password", "is a bcrypt hash"},
		{"bearer without token_file", "auth: {type: bearer}", "brokers[0].auth.token_file", "is required with auth type bearer"},
		{"bearer with password", "username: u, password: p, auth: {type: bearer, token_file: token}", "brokers[0].auth.type", "drop the broker's username/password"},
		{"token_file with oauth2", "auth: {type: oauth2, token_url: \"https://uaa/t\", client_id: c, client_secret_file: secret, token_file: token}", "brokers[0].auth.token_file", "is for auth type bearer, not oauth2"},
		{"oauth2 without token_url", "auth: {type: oauth2, client_id: c, client_secret_file: secret}", "brokers[0].auth.token_url", "is required with auth type oauth2"},
		{"oauth2 bad token_url", "auth: {type: oauth2, token_url: \"uaa/token\", client_id: c, client_secret_file: secret}", "brokers[0].auth.token_url", "must be an absolute http or https URL"},
		{"oauth2 without client_id", "auth: {type: oauth2, token_url: \"https://uaa/t\", client_secret_file: secret}", "brokers[0].auth.client_id", "is required with auth type oauth2"},
		{"oauth2 without secret", "auth: {type: oauth2, token_url: \"https://uaa/t\", client_id: c}", "brokers[0].auth.client_secret_file", "is required with auth type oauth2"},
		{"scopes with bearer", "auth: {type: bearer, token_file: token, scopes: [a]}", "brokers[0].auth.scopes", "is for auth type oauth2"},
		{"unknown type", "auth: {type: digest}", "brokers[0].auth.type", "must be one of basic, bearer, oauth2"},
	}
	for _, tc := range bad {
		_, err := parse(tc.yaml)
		var probs *Problems
		if !errors.As(err, &probs) {
			t.Errorf("%s: err = %v, want problems", tc.name, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant %s: …%s…", tc.name, err, tc.key, tc.want)
		}
	}
}

// TestWatchedFilesHoldBrokerAuthFiles: reload watches the next password,
// token and client secret files.
func TestWatchedFilesHoldBrokerAuthFiles(t *testing.T) {
	c := &Config{Brokers: []Broker{
		{NextPasswordFile: "next"},
		{Auth: &BrokerAuth{TokenFile: "token"}},
		{Auth: &BrokerAuth{ClientSecretFile: "/abs/secret"}},
	}}
	got := strings.Join(c.WatchedFiles("/etc/gw"), ",")
	if want := "/etc/gw/next,/etc/gw/token,/abs/secret"; got != want {
		t.Errorf("WatchedFiles = %s, want %s", got, want)
	}
}
