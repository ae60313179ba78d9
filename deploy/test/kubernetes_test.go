package deploytest

import (
	"os"
	"strings"
	"testing"
)

// TestKubernetesManifest: deploy/kubernetes/osb-gateway.yaml decodes
// strictly into the API types, its gateway.yaml loads with the Secret as
// environment, its locks live on a PersistentVolumeClaim of a one-replica
// StatefulSet, and its admin port has a token and a NetworkPolicy. (It used
// to keep no state at all, a Deployment whose rolling update ran two pods,
// and an admin port without a token or a NetworkPolicy.)
func TestKubernetesManifest(t *testing.T) {
	raw, err := os.ReadFile("../kubernetes/osb-gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeObjects("deploy/kubernetes/osb-gateway.yaml", raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkDeployment(o) {
		t.Error(p)
	}
	if strings.Contains(string(raw), "SIGHUP") && !strings.Contains(string(raw), "cannot send SIGHUP") {
		t.Error("the manifest tells to send SIGHUP, which the image (no shell, no kill) cannot receive through kubectl exec")
	}
}

// TestCheckDeploymentFindsProblems: the checks refuse what the manifests
// once shipped: a Deployment with no state volume and an open admin port.
func TestCheckDeploymentFindsProblems(t *testing.T) {
	old := `
apiVersion: v1
kind: ConfigMap
metadata: {name: osb-gateway}
data:
  gateway.yaml: |
    listen: {address: ":8080", shutdown_delay: 0s, shutdown_grace: 20s}
    admin: {address: ":9090"}
    brokers: [{name: b, url: "http://b"}]
    tenants: [{name: t, credentials: [{username: u, password: p}], routes: [{broker: b}]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: osb-gateway}
spec:
  replicas: 1
  selector: {matchLabels: {app: osb-gateway}}
  template:
    metadata: {labels: {app: osb-gateway}}
    spec:
      terminationGracePeriodSeconds: 30
      securityContext: {runAsNonRoot: true, runAsUser: 65532}
      containers:
        - name: osb-gateway
          image: ghcr.io/osb-gateway/osb-gateway:v0.1.0
          args: ["serve", "-config", "/etc/osb-gateway/gateway.yaml"]
          ports: [{name: osb, containerPort: 8080}, {name: admin, containerPort: 9090}]
          readinessProbe: {httpGet: {path: /readyz, port: admin}}
          livenessProbe: {httpGet: {path: /healthz, port: admin}}
          volumeMounts: [{name: config, mountPath: /etc/osb-gateway, readOnly: true}]
      volumes: [{name: config, configMap: {name: osb-gateway}}]
`
	o, err := decodeObjects("old", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(checkDeployment(o), "\n")
	for _, want := range []string{
		"a rolling Deployment with state.backend bolt",
		"state.path /etc/osb-gateway/osb-gateway.db is not on a PersistentVolumeClaim",
		"admin.token is not set",
		"no NetworkPolicy selects the pods",
		"readOnlyRootFilesystem is not set",
		"no listen.shutdown_delay (nor preStop sleep)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the problems lack %q:\n%s", want, got)
		}
	}
}
