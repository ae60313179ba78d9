package deploytest

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "../helm/osb-gateway"

// testSecrets are the values every rendering needs: the Secret's keys the
// default config references, and the admin token.
const testSecrets = `
secrets:
  env: {MYSQL_BROKER_PASSWORD: broker-pass, CF_PROD_PASSWORD: platform-pass}
admin: {token: 0123456789abcdef-token}
`

// render renders the chart as helm template would, with the values files
// given (later ones win), and returns the manifests in file order.
// renderDeployment renders the chart with values, decodes its objects
// strictly (failing the test on an error) and reports what checkDeployment
// finds in them as errors; it returns the rendered text and the objects.
func renderDeployment(t *testing.T, name string, values ...string) (string, *objects) {
	t.Helper()
	out, err := render(t, values...)
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeObjects(name, []byte(out))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, p := range checkDeployment(o) {
		t.Error(p)
	}
	return out, o
}

func render(t *testing.T, values ...string) (string, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return renderChart(t, ch, values...)
}

func renderChart(t *testing.T, ch *chart.Chart, values ...string) (string, error) {
	t.Helper()
	vals := map[string]any{}
	for _, v := range values {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(v), &m); err != nil {
			t.Fatal(err)
		}
		vals = chartutil.CoalesceTables(m, vals)
	}
	opts := chartutil.ReleaseOptions{Name: "gw", Namespace: "osb", Revision: 1, IsInstall: true}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"}
	rv, err := chartutil.ToRenderValues(ch, vals, opts, caps)
	if err != nil {
		return "", err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", name, files[name])
	}
	return b.String(), nil
}

// TestHelmChartLints: helm lint finds nothing, with the test's values.
func TestHelmChartLints(t *testing.T) {
	var vals map[string]any
	if err := yaml.Unmarshal([]byte(testSecrets), &vals); err != nil {
		t.Fatal(err)
	}
	res := lint.AllWithKubeVersion(chartDir, vals, "osb", &chartutil.KubeVersion{Version: "v1.33.0", Major: "1", Minor: "33"})
	for _, m := range res.Messages {
		if m.Severity > support.InfoSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

// TestHelmChartRenders renders the chart with values a user would give
// and checks every object against the API types and the deployment
// properties the README promises.
func TestHelmChartRenders(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string
		kinds  map[string]int // kind → count
	}{
		{
			name:   "defaults: one replica, bolt on a claim",
			values: ``,
			kinds:  map[string]int{"StatefulSet": 1, "Deployment": 0, "PodDisruptionBudget": 0, "NetworkPolicy": 1, "ServiceMonitor": 0},
		},
		{
			name: "three replicas on Redis, with a ServiceMonitor",
			values: `
replicaCount: 3
state: {backend: redis, redis: {addrs: ["redis-master.redis.svc:6379"], passwordKey: REDIS_PASSWORD}}
secrets: {env: {REDIS_PASSWORD: redis-pass}}
serviceMonitor: {enabled: true, labels: {release: prometheus}}
`,
			kinds: map[string]int{"StatefulSet": 0, "Deployment": 1, "PodDisruptionBudget": 1, "NetworkPolicy": 1, "ServiceMonitor": 1},
		},
		{
			name: "two replicas on PostgreSQL",
			values: `
replicaCount: 2
state: {backend: postgres, postgres: {urlKey: POSTGRES_URL, statementTimeout: 3s}}
secrets: {env: {POSTGRES_URL: "postgres://gw:pw@pg-a:5432,pg-b:5432/osb?target_session_attrs=read-write"}}
`,
			kinds: map[string]int{"StatefulSet": 0, "Deployment": 1, "PodDisruptionBudget": 1},
		},
		{
			name: "an existing Secret, an image digest, listener tuning",
			values: `
secrets: {existingSecret: gw-secrets, env: null}
admin: {token: ""}
image: {digest: "sha256:0000000000000000000000000000000000000000000000000000000000000000"}
config: {listen: {read_timeout: 30s}}
networkPolicy: {osbFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: cf}}}]}
`,
			kinds: map[string]int{"StatefulSet": 1, "Secret": 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			externalSecrets["gw-secrets"] = &corev1.Secret{StringData: map[string]string{
				"MYSQL_BROKER_PASSWORD": "x", "CF_PROD_PASSWORD": "y", "OSB_GATEWAY_ADMIN_TOKEN": "0123456789abcdef-token"}}
			out, o := renderDeployment(t, tc.name, testSecrets, tc.values)
			count := map[string]int{}
			for _, obj := range o.all {
				gvks, _, _ := scheme.ObjectKinds(obj)
				count[gvks[0].Kind]++
			}
			for kind, n := range tc.kinds {
				if count[kind] != n {
					t.Errorf("%d %s, want %d (rendered: %v)", count[kind], kind, n, count)
				}
			}
			if t.Failed() {
				t.Log(out)
			}
		})
	}
}

// TestHelmChartRefusesUnsafeValues: values that would lose or split the
// locks, or leave the admin routes without a token, fail to render.
func TestHelmChartRefusesUnsafeValues(t *testing.T) {
	for _, tc := range []struct{ name, values, says string }{
		{"bolt with two replicas", "replicaCount: 2", "use state.backend redis or postgres for more than one replica"},
		{"postgres without a URL", "state: {backend: postgres}", "state.backend postgres needs state.postgres.urlKey"},
		{"postgres URL not in the Secret", "state: {backend: postgres, postgres: {urlKey: POSTGRES_URL}}", "secrets.env has no such key"},
		{"redis without addresses", "state: {backend: redis}", "state.backend redis needs state.redis.addrs"},
		{"redis password not in the Secret", "state: {backend: redis, redis: {addrs: [r:6379], passwordKey: REDIS_PASSWORD}}", "secrets.env has no such key"},
		{"memory state", "state: {backend: memory}", "at '/state/backend': value must be one of 'bolt', 'redis', 'postgres'"},
		{"no admin token", "admin: {token: \"\"}", "admin.token is required"},
		{"short admin token", "admin: {token: short}", "at least 16 characters"},
		{"state in config", "config: {state: {backend: memory}}", "config.state: the chart sets it"},
		{"listen address in config", "config: {listen: {address: \":1\"}}", "config.listen: the chart sets it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, testSecrets, tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %v, want one saying %q", err, tc.says)
			}
		})
	}
}
