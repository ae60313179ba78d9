package deploytest

import (
	"os"
	"strings"
	"testing"
	"time"
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

// TestKubernetesPostgresManifest: deploy/kubernetes/osb-gateway-postgres.yaml
// decodes strictly into the API types and passes the same checks; its
// gateway.yaml loads with the pod's environment and keeps the state in
// PostgreSQL at the URL of the Secret osb-gateway-db (key uri, as PostgreSQL
// operators name it), written in no ConfigMap; it runs several replicas,
// surging one pod at a time, with a PodDisruptionBudget.
func TestKubernetesPostgresManifest(t *testing.T) {
	const file = "../kubernetes/osb-gateway-postgres.yaml"
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	o, err := decodeObjects(file, raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkDeployment(o) {
		t.Error(p)
	}
	db, ok := o.secrets["osb-gateway-db"]
	if !ok || db.StringData["uri"] == "" {
		t.Fatal("no Secret osb-gateway-db with key uri")
	}
	cfgs, err := o.configs()
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range cfgs {
		wantPostgres(t, cfg, db.StringData["uri"], 10, 5*time.Second, 5*time.Second)
	}
	if len(o.deployments) != 1 || len(o.statefulSets) != 0 {
		t.Fatalf("%d Deployments, %d StatefulSets; want one Deployment", len(o.deployments), len(o.statefulSets))
	}
	d := o.deployments[0]
	if replicasOf(d.Spec.Replicas) < 2 {
		t.Errorf("%d replicas: the variant is for several", replicasOf(d.Spec.Replicas))
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Error("a rolling update may take a pod away before its successor is ready (want maxUnavailable 0)")
	}
	if len(o.pdbs) != 1 {
		t.Errorf("%d PodDisruptionBudgets, want 1", len(o.pdbs))
	}
}
