package deploytest

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// gatewayBinary builds cmd/osb-gateway of the parent module once.
var gatewayBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "osb-gateway-deploytest")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "osb-gateway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/osb-gateway")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.New(string(out))
	}
	return bin, nil
})

// checkJob is the chart's config check: the hook Job and its container.
func checkJob(t *testing.T, o *objects) (*batchv1.Job, corev1.Container) {
	t.Helper()
	if len(o.jobs) != 1 {
		t.Fatalf("%d Jobs, want the one config check", len(o.jobs))
	}
	j := o.jobs[0]
	if len(j.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Job %s: %d containers", j.Name, len(j.Spec.Template.Spec.Containers))
	}
	return j, j.Spec.Template.Spec.Containers[0]
}

// runHookCommand runs the check Job's command, as its pod would, on the
// binary built from this tree: the config file from the hook's ConfigMap,
// the environment from the hook's Secret. It returns the exit code and
// what the check printed.
func runHookCommand(t *testing.T, o *objects) (int, string) {
	t.Helper()
	bin, err := gatewayBinary()
	if err != nil {
		t.Fatalf("go build ./cmd/osb-gateway: %v", err)
	}
	j, c := checkJob(t, o)
	args := slices.Clone(c.Args)
	file := configArg(args)
	data, ok := mountedConfig(o, j.Spec.Template.Spec, c, file)
	if !ok {
		t.Fatalf("Job %s: -config %s is no key of a mounted ConfigMap", j.Name, file)
	}
	local := filepath.Join(t.TempDir(), filepath.Base(file))
	if err := os.WriteFile(local, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range args {
		if args[i] == file {
			args[i] = local // the only change: where the file is
		}
	}
	env, err := podEnv(o, c)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String()
}

// mountedConfig is the ConfigMap key a container reads at file.
func mountedConfig(o *objects, spec corev1.PodSpec, c corev1.Container, file string) (string, bool) {
	for _, m := range c.VolumeMounts {
		if filepath.Dir(file) != filepath.Clean(m.MountPath) {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				if cm, ok := o.configMaps[v.ConfigMap.Name]; ok {
					d, ok := cm.Data[filepath.Base(file)]
					return d, ok
				}
			}
		}
	}
	return "", false
}

// TestHelmChartChecksConfigBeforeRollout: the chart runs the gateway's
// own "check -offline" on the rendered gateway.yaml in a pre-install and
// pre-upgrade hook, with the pods' image, the same file and the same
// secrets, before anything is replaced; with the default values it passes.
func TestHelmChartChecksConfigBeforeRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gateway")
	}
	for _, tc := range []struct{ name, values string }{
		{"chart's Secret", ""},
		{"existing Secret", "secrets: {existingSecret: gw-secrets, env: null}\nadmin: {token: \"\"}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			externalSecrets["gw-secrets"] = &corev1.Secret{StringData: map[string]string{
				"MYSQL_BROKER_PASSWORD": "x", "CF_PROD_PASSWORD": "y", "OSB_GATEWAY_ADMIN_TOKEN": "0123456789abcdef-token"}}
			out, err := render(t, testSecrets, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			o, err := decodeObjects(tc.name, []byte(out))
			if err != nil {
				t.Fatal(err)
			}
			j, c := checkJob(t, o)
			if got := j.Annotations["helm.sh/hook"]; got != "pre-install,pre-upgrade" {
				t.Errorf("Job %s: helm.sh/hook %q, want pre-install,pre-upgrade", j.Name, got)
			}
			if want := []string{"check", "-offline", "-config", "/etc/osb-gateway/gateway.yaml"}; !slices.Equal(c.Args, want) {
				t.Errorf("Job %s: args %q, want %q", j.Name, c.Args, want)
			}
			if j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 0 {
				t.Errorf("Job %s: backoffLimit %v, want 0 (a refused config fails at once)", j.Name, j.Spec.BackoffLimit)
			}
			ws := o.workloads()
			if len(ws) != 1 {
				t.Fatalf("%d workloads", len(ws))
			}
			gw, _ := gatewayContainer(ws[0].pod.Spec)
			if c.Image != gw.Image {
				t.Errorf("the check runs %s, the pods %s", c.Image, gw.Image)
			}
			// The same file and the same environment as the pods'.
			podFile, _ := mountedConfig(o, ws[0].pod.Spec, gw, configArg(gw.Args))
			hookFile, _ := mountedConfig(o, j.Spec.Template.Spec, c, configArg(c.Args))
			if podFile == "" || podFile != hookFile {
				t.Errorf("the check reads another gateway.yaml than the pods:\n%s\n---\n%s", hookFile, podFile)
			}
			podEnvs, _ := podEnv(o, gw)
			hookEnvs, _ := podEnv(o, c)
			if len(podEnvs) == 0 || !maps.Equal(podEnvs, hookEnvs) {
				t.Errorf("the check's environment %v differs from the pods' %v", keys(hookEnvs), keys(podEnvs))
			}
			if o.configMapAnnotations(j)["helm.sh/hook"] == "" {
				t.Error("the check's ConfigMap is no hook: at pre-upgrade it would not exist yet, or hold the old config")
			}
			if code, said := runHookCommand(t, o); code != 0 {
				t.Errorf("the check of the default config: exit %d\n%s", code, said)
			}
		})
	}
}

// TestHelmChartRefusesBadConfig: a typo'd key in config is refused by the
// values schema when the chart renders; a route to a broker that does not
// exist passes the schema (it takes two keys to see) and is refused by the
// hook's check, exit 1 with the problem named, so the upgrade stops before
// the one replica is replaced.
func TestHelmChartRefusesBadConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gateway")
	}
	t.Run("typo'd key: the values schema", func(t *testing.T) {
		_, err := render(t, testSecrets, `
config:
  brokers:
    - {name: mysql, url: "http://mysql-broker.brokers.svc:8080", username: gateway, password: "${MYSQL_BROKER_PASSWORD}", timout: 30s}
`)
		if err == nil || !strings.Contains(err.Error(), "at '/config/brokers/0'") || !strings.Contains(err.Error(), "'timout'") {
			t.Errorf("error %v, want the values schema naming /config/brokers/0 and 'timout'", err)
		}
	})
	t.Run("route to an unknown broker: the hook's check", func(t *testing.T) {
		out, err := render(t, testSecrets, `
config:
  tenants:
    - name: cf-prod
      credentials: [{username: cf-prod, password: "${CF_PROD_PASSWORD}"}]
      routes: [{broker: postgres}]
`)
		if err != nil {
			t.Fatalf("render: %v (the schema cannot see an unknown broker; the check must)", err)
		}
		o, err := decodeObjects("unknown broker", []byte(out))
		if err != nil {
			t.Fatal(err)
		}
		code, said := runHookCommand(t, o)
		if code != 1 || !strings.Contains(said, "tenants[0].routes[0].broker") || !strings.Contains(said, "postgres") {
			t.Errorf("exit %d, want 1 naming tenants[0].routes[0].broker and postgres:\n%s", code, said)
		}
	})
}

// configMapAnnotations are the annotations of the ConfigMap the check
// Job mounts.
func (o *objects) configMapAnnotations(j *batchv1.Job) map[string]string {
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			if cm, ok := o.configMaps[v.ConfigMap.Name]; ok {
				return cm.Annotations
			}
		}
	}
	return nil
}

func keys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
