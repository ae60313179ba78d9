package config

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Secret is a string that never prints: String, GoString, MarshalText and
// slog's LogValue all return a redaction marker.
type Secret string

// Redacted is what a Secret prints as.
const Redacted = "[REDACTED]"

// String implements fmt.Stringer.
func (Secret) String() string { return Redacted }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return Redacted }

// MarshalText implements encoding.TextMarshaler (used by JSON and YAML).
func (Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// Reveal returns the secret value.
func (s Secret) Reveal() string { return string(s) }

// LogValue implements slog.LogValuer: a Secret logs as Redacted.
func (Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// IsBcrypt reports whether the credential's password is a bcrypt hash (it
// starts with "$2a$", "$2b$" or "$2y$"), to be compared with
// bcrypt.CompareHashAndPassword rather than in constant time as plain text.
// After Parse such a password is known to be a well-formed hash.
func (c *Credential) IsBcrypt() bool { return hasBcryptPrefix(c.Password.Reveal()) }

// hasBcryptPrefix reports whether s starts like a bcrypt hash.
func hasBcryptPrefix(s string) bool {
	return strings.HasPrefix(s, "$2a$") || strings.HasPrefix(s, "$2b$") || strings.HasPrefix(s, "$2y$")
}

// resolveSecrets reads password_file for every credential and broker,
// checks that each has the password it needs, and resolves the broker TLS
// file names against baseDir, checking that they can be read. state.path
// and audit.path are resolved against baseDir too.
func resolveSecrets(c *Config, baseDir string, probs *Problems) {
	for i := range c.Tenants {
		for j := range c.Tenants[i].Credentials {
			cr := &c.Tenants[i].Credentials[j]
			path := joinIndex(joinKey(joinIndex("tenants", i), "credentials"), j)
			resolvePassword(&cr.Password, cr.PasswordFile, baseDir, path, probs)
			switch {
			case cr.Password == "":
				probs.addf(path+".password", "is required (or set password_file)")
			case cr.IsBcrypt():
				if msg := checkBcrypt(cr.Password.Reveal()); msg != "" {
					probs.addf(path+".password", "%s", msg)
				}
			}
		}
	}
	for i := range c.Brokers {
		b := &c.Brokers[i]
		path := joinIndex("brokers", i)
		resolvePassword(&b.Password, b.PasswordFile, baseDir, path, probs)
		switch {
		case b.Username != "" && b.Password == "":
			probs.addf(path+".password", "is required when username is set (or set password_file)")
		case b.Username == "" && b.Password != "":
			probs.addf(path+".username", "is required when a password is set")
		case hasBcryptPrefix(b.Password.Reveal()):
			probs.addf(path+".password", "is a bcrypt hash, but the gateway must send the broker its real password")
		}
		resolveBrokerAuth(b, baseDir, path, probs) // brokerauth.go
		resolveTLSFiles(&b.TLS, baseDir, path+".tls", probs)
	}
	resolveListenTLSFiles(&c.Listen.TLS, baseDir, probs) // listen_tls.go
	resolveAuditKey(&c.Audit, baseDir, probs)            // telemetry.go
	resolvePassword(&c.State.Redis.Password, c.State.Redis.PasswordFile, baseDir, "state.redis", probs)
	resolveSecretFile(&c.State.Postgres.URL, c.State.Postgres.URLFile, baseDir, "state.postgres.url", probs)
	c.State.Path = resolvePath(baseDir, c.State.Path)
	if p := c.Audit.Path; p != "" && !strings.HasSuffix(p, "/") { // a directory is reported by checkTelemetry
		c.Audit.Path = resolvePath(baseDir, p)
	}
	if f := c.Inventory.KeyFile; f != "" {
		c.Inventory.KeyFile = resolvePath(baseDir, f)
		if err := checkReadable(c.Inventory.KeyFile); err != nil {
			probs.addf("inventory.key_file", "cannot read %q: %s", f, fileError(err))
		}
	}
	if f := c.Admin.TokenFile; f != "" {
		if c.Admin.Token != "" {
			probs.addf("admin.token_file", "cannot be set together with token; use one of them")
		} else if data, err := os.ReadFile(resolvePath(baseDir, f)); err != nil {
			probs.addf("admin.token_file", "cannot read %q: %s", f, fileError(err))
		} else {
			c.Admin.Token = Secret(strings.TrimRight(string(data), "\r\n"))
		}
	}
	if t := c.Admin.Token.Reveal(); t != "" && len(t) < 16 {
		probs.addf("admin.token", "must be at least 16 characters")
	}
}

// resolvePassword fills *pw from file when file is set. path names the
// credential or broker holding both fields.
func resolvePassword(pw *Secret, file, baseDir, path string, probs *Problems) {
	if file == "" {
		return
	}
	if *pw != "" {
		probs.addf(path+".password_file", "cannot be set together with password; use one of them")
		return
	}
	data, err := os.ReadFile(resolvePath(baseDir, file))
	if err != nil {
		probs.addf(path+".password_file", "cannot read %q: %s", file, fileError(err))
		probs.suppress(path + ".password")
		return
	}
	s := strings.TrimRight(string(data), "\r\n")
	if s == "" {
		probs.addf(path+".password_file", "%q is empty", file)
		probs.suppress(path + ".password")
		return
	}
	*pw = Secret(s)
}

// resolveSecretFile fills *secret, the value of key path, from file (key
// path+"_file") when file is set: resolvePassword for a secret not named
// password.
func resolveSecretFile(secret *Secret, file, baseDir, path string, probs *Problems) {
	if file == "" {
		return
	}
	if *secret != "" {
		probs.addf(path+"_file", "cannot be set together with %s; use one of them", path[strings.LastIndexByte(path, '.')+1:])
		return
	}
	data, err := os.ReadFile(resolvePath(baseDir, file))
	if err != nil {
		probs.addf(path+"_file", "cannot read %q: %s", file, fileError(err))
		probs.suppress(path)
		return
	}
	s := strings.TrimRight(string(data), "\r\n")
	if s == "" {
		probs.addf(path+"_file", "%q is empty", file)
		probs.suppress(path)
		return
	}
	*secret = Secret(s)
}

// resolveTLSFiles makes the TLS file names relative to baseDir and checks
// that each can be opened and that cert_file and key_file come together.
func resolveTLSFiles(t *UpstreamTLS, baseDir, path string, probs *Problems) {
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		probs.addf(path+".key_file", "is required when cert_file is set")
	case t.CertFile == "" && t.KeyFile != "":
		probs.addf(path+".cert_file", "is required when key_file is set")
	}
	for _, f := range []struct {
		key  string
		name *string
	}{{"ca_file", &t.CAFile}, {"cert_file", &t.CertFile}, {"key_file", &t.KeyFile}} {
		if *f.name == "" {
			continue
		}
		resolved := resolvePath(baseDir, *f.name)
		if err := checkReadable(resolved); err != nil {
			probs.addf(path+"."+f.key, "cannot read %q: %s", *f.name, fileError(err))
			continue
		}
		*f.name = resolved
	}
}

// resolvePath joins a relative name to baseDir.
func resolvePath(baseDir, name string) string {
	if filepath.IsAbs(name) || baseDir == "" {
		return name
	}
	return filepath.Join(baseDir, name)
}

// checkReadable opens name for reading and reports why it cannot.
func checkReadable(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return errors.New("is a directory")
	}
	return nil
}

// fileError is the part of a file error worth showing: the cause without
// the (already quoted) file name.
func fileError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// checkBcrypt returns why hash, which starts like a bcrypt hash, is not a
// usable one, or "" if it is. The message never quotes the hash.
func checkBcrypt(hash string) string {
	const (
		bad    = "starts like a bcrypt hash but is not one: "
		layout = `it must be "$2a$", "$2b$" or "$2y$", a two-digit cost, "$" and 53 characters of salt and hash`
	)
	if len(hash) != 60 {
		return fmt.Sprintf(bad+"it has %d characters, not 60", len(hash))
	}
	if _, err := bcrypt.Cost([]byte(hash)); err != nil {
		var ce bcrypt.InvalidCostError
		if errors.As(err, &ce) {
			return fmt.Sprintf(bad+"its cost %d is outside %d to %d", int(ce), bcrypt.MinCost, bcrypt.MaxCost)
		}
		return bad + layout
	}
	if hash[6] != '$' {
		return bad + layout
	}
	for i := 7; i < len(hash); i++ {
		if !isBcryptBase64(hash[i]) {
			return bad + "its salt and hash may hold only letters, digits, \".\" and \"/\""
		}
	}
	return ""
}

// isBcryptBase64 reports whether c belongs to bcrypt's base64 alphabet.
func isBcryptBase64(c byte) bool {
	return c == '.' || c == '/' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
