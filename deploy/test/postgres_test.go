package deploytest

import (
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	corev1 "k8s.io/api/core/v1"
)

// pgURL is the connection URL the tests keep in a Secret: two hosts, so a
// failover is followed.
const pgURL = "postgres://gw:pg-secret-pw@pg-a:5432,pg-b:5432/osb?target_session_attrs=read-write"

// wantPostgres checks a loaded gateway.yaml: state in PostgreSQL at url, with
// the pool settings given.
func wantPostgres(t *testing.T, cfg *config.Config, url string, maxConns int, stmt, connect time.Duration) {
	t.Helper()
	pg := cfg.State.Postgres
	if cfg.State.Backend != "postgres" {
		t.Errorf("state.backend %s, want postgres", cfg.State.Backend)
	}
	if pg.URL.Reveal() != url {
		t.Errorf("state.postgres.url is not the Secret's value %q", url)
	}
	if pg.MaxConns != maxConns || pg.StatementTimeout != stmt || pg.ConnectTimeout != connect {
		t.Errorf("state.postgres max_conns %d, statement_timeout %s, connect_timeout %s; want %d, %s, %s",
			pg.MaxConns, pg.StatementTimeout, pg.ConnectTimeout, maxConns, stmt, connect)
	}
}

// TestHelmChartPostgres: with state.backend postgres the chart renders a
// Deployment of several replicas whose gateway.yaml (decoded strictly into
// the gateway's types) keeps its state in PostgreSQL, with the URL from a
// Secret — a key of the chart's Secret, of an existing one, or a Secret of
// its own such as a PostgreSQL operator makes (urlSecret) — never written in
// the ConfigMap, and the pool settings passed through. The config check hook
// gets the same URL, and the gateway's own check passes on it.
func TestHelmChartPostgres(t *testing.T) {
	for _, tc := range []struct{ name, values string }{
		{"a key of the chart's Secret", `
secrets: {env: {POSTGRES_URL: "` + pgURL + `"}}
state: {backend: postgres, postgres: {urlKey: POSTGRES_URL, maxConns: 20, statementTimeout: 3s, connectTimeout: 2s}}
`},
		{"a key of an existing Secret", `
secrets: {existingSecret: gw-secrets, env: null}
admin: {token: ""}
state: {backend: postgres, postgres: {urlKey: POSTGRES_URL, maxConns: 20, statementTimeout: 3s, connectTimeout: 2s}}
`},
		{"an operator's Secret (urlSecret)", `
state: {backend: postgres, postgres: {urlSecret: {name: osb-db-app}, maxConns: 20, statementTimeout: 3s, connectTimeout: 2s}}
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			externalSecrets["gw-secrets"] = &corev1.Secret{StringData: map[string]string{"POSTGRES_URL": pgURL,
				"MYSQL_BROKER_PASSWORD": "x", "CF_PROD_PASSWORD": "y", "OSB_GATEWAY_ADMIN_TOKEN": "0123456789abcdef-token"}}
			// As CloudNativePG names its keys.
			externalSecrets["osb-db-app"] = &corev1.Secret{Data: map[string][]byte{"uri": []byte(pgURL), "username": []byte("gw")}}
			out, o := renderDeployment(t, tc.name, testSecrets, "replicaCount: 3\n", tc.values)
			if len(o.deployments) != 1 || replicasOf(o.deployments[0].Spec.Replicas) != 3 || len(o.statefulSets) != 0 {
				t.Errorf("%d Deployments, %d StatefulSets; want one Deployment of 3 replicas", len(o.deployments), len(o.statefulSets))
			}
			cfgs, err := o.configs()
			if err != nil {
				t.Fatal(err)
			}
			for _, cfg := range cfgs {
				wantPostgres(t, cfg, pgURL, 20, 3*time.Second, 2*time.Second)
			}
			if strings.Contains(out, "pg-secret-pw") && !strings.Contains(tc.values, "secrets: {env:") {
				t.Error("the password is in the rendered manifests though no value of the chart holds it")
			}
			if testing.Short() {
				return
			}
			// The hook's container gets the URL as the pods' does.
			_, hook := checkJob(t, o)
			env, err := podEnv(o, hook)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, v := range env {
				found = found || v == pgURL
			}
			if !found {
				t.Error("the config check hook's container has no environment variable holding the URL")
			}
			if code, said := runHookCommand(t, o); code != 0 {
				t.Errorf("the config check hook exits %d:\n%s", code, said)
			}
		})
	}
}

// TestHelmChartRefusesPostgresValues: the URL's source is named once, and
// fully.
func TestHelmChartRefusesPostgresValues(t *testing.T) {
	for _, tc := range []struct{ name, values, says string }{
		{"neither urlKey nor urlSecret", "state: {backend: postgres}", "needs state.postgres.urlKey (the key of the chart's Secret holding the connection URL) or state.postgres.urlSecret.name"},
		{"both", "secrets: {env: {POSTGRES_URL: x}}\nstate: {backend: postgres, postgres: {urlKey: POSTGRES_URL, urlSecret: {name: db}}}", "set one of them"},
		{"urlSecret without a key", "state: {backend: postgres, postgres: {urlSecret: {name: db, key: \"\"}}}", "which key of Secret db holds the connection URL"},
		{"urlSecret misspelt", "state: {backend: postgres, postgres: {urlSecret: {nmae: db}}}", "additional properties 'nmae' not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, testSecrets, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v, want one saying %q", err, tc.says)
			}
		})
	}
}

// TestCheckDeploymentFindsInlineStoreSecrets: the check the tests above
// rest on refuses a PostgreSQL URL written in the ConfigMap.
func TestCheckDeploymentFindsInlineStoreSecrets(t *testing.T) {
	out, err := render(t, testSecrets, `
replicaCount: 2
secrets: {env: {POSTGRES_URL: "`+pgURL+`"}}
state: {backend: postgres, postgres: {urlKey: POSTGRES_URL}}
`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "${POSTGRES_URL}") {
		t.Fatalf("the rendered gateway.yaml does not read ${POSTGRES_URL}:\n%s", out)
	}
	o, err := decodeObjects("inline", []byte(strings.ReplaceAll(out, "${POSTGRES_URL}", pgURL)))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(checkDeployment(o), "\n")
	if !strings.Contains(got, "state.postgres.url is written in ConfigMap gw-osb-gateway") {
		t.Errorf("the problems lack the URL in the ConfigMap:\n%s", got)
	}
}
