package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestProblemsNeverShowSecrets builds a file whose secrets sit in every
// place that produces a problem and checks that no message repeats them.
func TestProblemsNeverShowSecrets(t *testing.T) {
	dir := t.TempDir()
	secrets := map[string]string{
		"file": "$2b$04$file-secret-not-a-real-hash",
		"env":  "env-secret-value",
		"bad":  "$2a$10$inline-secret-bad-hash",
		"hash": goodHash,
		"url":  "url-secret",
		"both": "both-secret",
		"typo": "typo-secret",
		"list": "list-secret",
	}
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte(secrets["file"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`tenants:
  - name: cf-prod
    credentials:
      - username: a
        password: %q
      - username: b
        password_file: pw
      - username: c
        password: %q
        password_file: pw
      - username: d
        pasword: %q
      - username: e
        password: [%q]
    routes:
      - broker: mysql
brokers:
  - name: mysql
    url: https://gw:%s@mysql.example.com/?token=%s
    timeout: ${SECRET}
    username: gw
    password: %q
`, secrets["bad"], secrets["both"], secrets["typo"], secrets["list"], secrets["url"], secrets["url"], secrets["hash"])
	_, err := Parse([]byte(doc), Options{
		BaseDir:   dir,
		LookupEnv: func(string) (string, bool) { return secrets["env"], true },
	})
	var probs *Problems
	if !errors.As(err, &probs) {
		t.Fatalf("Parse = %v, want *Problems", err)
	}
	if probs.Len() < 9 {
		t.Errorf("got %d problems, want one per planted secret:\n%v", probs.Len(), err)
	}
	shown := err.Error() + fmt.Sprintf("\n%v\n%+v\n%#v", probs, probs, probs)
	for name, s := range secrets {
		if strings.Contains(shown, s) {
			t.Errorf("the %s secret %q appears in the problems:\n%s", name, s, err)
		}
	}
}

// TestConfigNeverPrintsSecrets checks every way a loaded Config gets
// printed or serialized.
func TestConfigNeverPrintsSecrets(t *testing.T) {
	cfg, err := Load("testdata/good/env.yaml", WithLookupEnv(lookupTestEnv))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	fmt.Fprintf(&out, "%v\n%+v\n%#v\n%s\n", cfg, cfg, cfg, cfg.Brokers[0].Password)
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(j)
	y, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(y)
	slog.New(slog.NewJSONHandler(&out, nil)).Info("config", "cfg", cfg, "pw", cfg.Brokers[0].Password)
	slog.New(slog.NewTextHandler(&out, nil)).Info("config", "cfg", cfg, "pw", cfg.Tenants[0].Credentials[0].Password)

	for _, s := range []string{testEnv["CF_PROD_PASSWORD"], testEnv["MYSQL_BROKER_PASSWORD"]} {
		if strings.Contains(out.String(), s) {
			t.Errorf("secret %q printed:\n%s", s, out.String())
		}
	}
	if !strings.Contains(out.String(), Redacted) {
		t.Errorf("output has no %s marker:\n%s", Redacted, out.String())
	}
}

func TestIsBcrypt(t *testing.T) {
	tests := []struct {
		password string
		want     bool
	}{
		{goodHash, true},
		{"$2b$" + goodHash[4:], true},
		{"$2y$" + goodHash[4:], true},
		{"$2x$" + goodHash[4:], false},
		{"$2a", false},
		{"plain", false},
		{"", false},
	}
	for _, tt := range tests {
		c := Credential{Username: "u", Password: Secret(tt.password)}
		if got := c.IsBcrypt(); got != tt.want {
			t.Errorf("IsBcrypt(%q) = %v, want %v", tt.password, got, tt.want)
		}
	}
}

func TestCheckBcrypt(t *testing.T) {
	tests := []struct{ name, hash, want string }{
		{"valid", goodHash, ""},
		{"too long", goodHash + "x", "starts like a bcrypt hash but is not one: it has 61 characters, not 60"},
		{"cost too low", goodHash[:4] + "03" + goodHash[6:], "starts like a bcrypt hash but is not one: its cost 3 is outside 4 to 31"},
		{"cost not a number", goodHash[:4] + "1x" + goodHash[6:], `starts like a bcrypt hash but is not one: it must be "$2a$", "$2b$" or "$2y$", a two-digit cost, "$" and 53 characters of salt and hash`},
		{"bad alphabet", goodHash[:59] + "=", `starts like a bcrypt hash but is not one: its salt and hash may hold only letters, digits, "." and "/"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkBcrypt(tt.hash); got != tt.want {
				t.Errorf("checkBcrypt = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPasswordFileTrimming(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, content, want string }{
		{"no newline", "pw", "pw"},
		{"newline", "pw\n", "pw"},
		{"crlf", "pw\r\n", "pw"},
		{"several newlines", "pw\n\n", "pw"},
		{"inner spaces kept", " p w \n", " p w "},
		{"dollar not expanded", "${HOME}\n", "${HOME}"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("pw%d", i)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			doc := strings.Replace(minimalYAML, "password: platform-password", "password_file: "+name, 1)
			cfg, err := Parse([]byte(doc), Options{BaseDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Tenants[0].Credentials[0].Password.Reveal(); got != tt.want {
				t.Errorf("password = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTLSFilesResolvedAgainstBaseDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), []byte("pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]byte(minimalYAML+"    tls:\n      ca_file: ca.pem\n"), Options{BaseDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Brokers[0].TLS.CAFile, filepath.Join(dir, "ca.pem"); got != want {
		t.Errorf("ca_file = %q, want %q", got, want)
	}
}
