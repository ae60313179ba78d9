package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestStatePostgres: state.postgres.url is required with backend postgres,
// comes inline, from ${ENV} or from url_file, is checked for its form,
// and never appears in a problem; the pool settings have defaults.
func TestStatePostgres(t *testing.T) {
	const secret = "pg-s3cret"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pg-url"), []byte("postgres://gw:"+secret+"@db:5432/osb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, state string
		want        []string // problems, nil: valid
		url         string   // the URL resolved, when valid
	}{
		{"inline", "  postgres:\n    url: postgres://gw@db/osb\n", nil, "postgres://gw@db/osb"},
		{"dsn", "  postgres:\n    url: host=db dbname=osb\n", nil, "host=db dbname=osb"},
		{"env", "  postgres:\n    url: ${PG_URL}\n", nil, "postgres://gw:" + secret + "@db1,db2/osb?target_session_attrs=read-write"},
		{"file", "  postgres:\n    url_file: pg-url\n", nil, "postgres://gw:" + secret + "@db:5432/osb"},
		{"missing", "  postgres:\n    max_conns: 3\n",
			[]string{"state.postgres.url: is required with backend postgres (or set url_file) (line 13)"}, ""},
		{"not a URL", "  postgres:\n    url: gw:" + secret + "@db\n",
			[]string{"state.postgres.url: must be a libpq URL (postgres://user@host:5432/db?...) or a key=value DSN (host=... dbname=...) (line 14)"}, ""},
		{"both", "  postgres:\n    url: postgres://gw:" + secret + "@db/osb\n    url_file: pg-url\n",
			[]string{"state.postgres.url_file: cannot be set together with url; use one of them (line 15)"}, ""},
		{"file missing", "  postgres:\n    url_file: nope\n", []string{`state.postgres.url_file: cannot read "nope": no such file or directory (line 14)`}, ""},
		{"file empty", "  postgres:\n    url_file: empty\n", []string{`state.postgres.url_file: "empty" is empty (line 14)`}, ""},
		{"negative", "  postgres:\n    url: postgres://db/osb\n    max_conns: -1\n    statement_timeout: -1s\n",
			[]string{"state.postgres.max_conns: must not be negative (line 15)", "state.postgres.statement_timeout: must not be negative (line 16)"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := minimalYAML + "state:\n  backend: postgres\n" + tc.state
			cfg, err := Parse([]byte(doc), Options{BaseDir: dir, LookupEnv: func(k string) (string, bool) {
				if k == "PG_URL" {
					return "postgres://gw:" + secret + "@db1,db2/osb?target_session_attrs=read-write", true
				}
				return "", false
			}})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				pg := cfg.State.Postgres
				if pg.URL.Reveal() != tc.url || pg.MaxConns != DefaultPostgresMaxConns ||
					pg.StatementTimeout != 5*time.Second || pg.ConnectTimeout != 5*time.Second {
					t.Fatalf("state.postgres = %+v (url %q), want url %q and the defaults", pg, pg.URL.Reveal(), tc.url)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse: valid, want %q", tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("problems show the URL's password: %v", err)
			}
			got := strings.Split(err.Error(), "\n")
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.HasSuffix(g, w) || g == w }) {
					t.Errorf("problems %q lack %q", got, w)
				}
			}
		})
	}
}
