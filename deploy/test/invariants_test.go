package deploytest

import (
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/config"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// workload is a StatefulSet or a Deployment of the gateway, as far as the
// checks need it.
type workload struct {
	name     string
	kind     string
	replicas int32
	selector *metav1.LabelSelector
	pod      corev1.PodTemplateSpec
	claims   []corev1.PersistentVolumeClaim // StatefulSet volumeClaimTemplates
	recreate bool                           // a Deployment that stops old pods before new ones start
}

func (o *objects) workloads() []workload {
	var out []workload
	for _, s := range o.statefulSets {
		out = append(out, workload{name: s.Name, kind: "StatefulSet", replicas: replicasOf(s.Spec.Replicas),
			selector: s.Spec.Selector, pod: s.Spec.Template, claims: s.Spec.VolumeClaimTemplates})
	}
	for _, d := range o.deployments {
		out = append(out, workload{name: d.Name, kind: "Deployment", replicas: replicasOf(d.Spec.Replicas),
			selector: d.Spec.Selector, pod: d.Spec.Template, recreate: d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType})
	}
	return out
}

func replicasOf(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// checkDeployment checks what the README promises of every deployment of
// the gateway in o, and returns every problem found.
func checkDeployment(o *objects) []string {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	ws := o.workloads()
	if len(ws) == 0 {
		bad("no StatefulSet or Deployment")
	}
	for _, w := range ws {
		where := w.kind + " " + w.name
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(w.pod.Labels)) {
			bad("%s: the selector %v does not select the pod template's labels %v", where, w.selector, w.pod.Labels)
		}
		c, ok := gatewayContainer(w.pod.Spec)
		if !ok {
			bad("%s: no container runs osb-gateway serve -config FILE", where)
			continue
		}
		cfg, err := w.config(o, c)
		if err != nil {
			bad("%s: %v", where, err)
			continue
		}
		for _, p := range w.checkState(cfg) {
			bad("%s: %s", where, p)
		}
		for _, p := range w.checkSecretsOutOfConfigMaps(o, cfg, c) {
			bad("%s: %s", where, p)
		}
		for _, p := range w.checkPorts(cfg, c) {
			bad("%s: %s", where, p)
		}
		for _, p := range w.checkAdmin(o, cfg, c) {
			bad("%s: %s", where, p)
		}
		for _, p := range w.checkPod(cfg, c) {
			bad("%s: %s", where, p)
		}
		for _, svc := range o.services {
			if !selects(svc.Spec.Selector, w.pod.Labels) {
				continue
			}
			for _, sp := range svc.Spec.Ports {
				if _, ok := containerPort(c, sp.TargetPort); !ok {
					bad("Service %s: targetPort %s is no port of %s", svc.Name, sp.TargetPort.String(), where)
				}
			}
		}
		for _, pdb := range o.pdbs {
			s, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || !s.Matches(labels.Set(w.pod.Labels)) {
				bad("PodDisruptionBudget %s does not select the pods of %s", pdb.Name, where)
			}
			if w.replicas < 2 && pdb.Spec.MinAvailable != nil {
				bad("PodDisruptionBudget %s: minAvailable with one replica blocks every node drain", pdb.Name)
			}
		}
	}
	for _, sm := range o.serviceMonitors {
		found := false
		for _, svc := range o.services {
			s, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
			if err != nil || !s.Matches(labels.Set(svc.Labels)) {
				continue
			}
			for _, ep := range sm.Spec.Endpoints {
				for _, sp := range svc.Spec.Ports {
					if sp.Name == ep.Port {
						found = true
					}
				}
			}
		}
		if !found {
			bad("ServiceMonitor %s selects no Service with the port it scrapes", sm.Name)
		}
	}
	return probs
}

// configs loads the gateway.yaml of every workload in o, by workload name.
func (o *objects) configs() (map[string]*config.Config, error) {
	out := map[string]*config.Config{}
	for _, w := range o.workloads() {
		c, ok := gatewayContainer(w.pod.Spec)
		if !ok {
			return nil, fmt.Errorf("%s %s: no container runs osb-gateway serve -config FILE", w.kind, w.name)
		}
		cfg, err := w.config(o, c)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %v", w.kind, w.name, err)
		}
		out[w.name] = cfg
	}
	return out, nil
}

// gatewayContainer is the container whose arguments are serve -config.
func gatewayContainer(spec corev1.PodSpec) (corev1.Container, bool) {
	for _, c := range spec.Containers {
		args := append(append([]string{}, c.Command...), c.Args...)
		for _, a := range args {
			if a == "serve" && configArg(args) != "" {
				return c, true
			}
		}
	}
	return corev1.Container{}, false
}

// configArg is the value of -config in args.
func configArg(args []string) string {
	for i, a := range args {
		if (a == "-config" || a == "--config") && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "-config="); ok {
			return v
		}
	}
	return ""
}

// config loads the gateway.yaml the container reads (from the ConfigMap
// mounted at its directory) with the environment the pod gets.
func (w workload) config(o *objects, c corev1.Container) (*config.Config, error) {
	file := configArg(append(append([]string{}, c.Command...), c.Args...))
	var data string
	found := false
	for _, m := range c.VolumeMounts {
		if path.Dir(file) != path.Clean(m.MountPath) {
			continue
		}
		for _, v := range w.pod.Spec.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			cm, ok := o.configMaps[v.ConfigMap.Name]
			if !ok {
				return nil, fmt.Errorf("ConfigMap %q (volume %s) is not in the manifests", v.ConfigMap.Name, v.Name)
			}
			data, found = cm.Data[path.Base(file)]
		}
	}
	if !found {
		return nil, fmt.Errorf("-config %s: no ConfigMap key is mounted there", file)
	}
	env, err := podEnv(o, c)
	if err != nil {
		return nil, err
	}
	// Relative paths are relative to the file's directory, as Load makes them.
	cfg, err := config.Parse([]byte(data), config.Options{BaseDir: path.Dir(file),
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		return nil, fmt.Errorf("%s does not load: %v", file, err)
	}
	return cfg, nil
}

// podEnv is the container's environment from env and envFrom Secrets.
func podEnv(o *objects, c corev1.Container) (map[string]string, error) {
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.SecretRef == nil {
			continue
		}
		s, ok := o.secrets[from.SecretRef.Name]
		if !ok {
			// An existing Secret named by the values: the test supplies it.
			s, ok = externalSecrets[from.SecretRef.Name]
		}
		if !ok {
			return nil, fmt.Errorf("Secret %q (envFrom) is not in the manifests", from.SecretRef.Name)
		}
		for k, v := range s.Data {
			env[k] = string(v)
		}
		for k, v := range s.StringData {
			env[k] = v
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref == nil {
			return nil, fmt.Errorf("env %s: only values and secretKeyRefs are expected", e.Name)
		}
		s, ok := o.secrets[ref.Name]
		if !ok {
			s, ok = externalSecrets[ref.Name]
		}
		if !ok {
			return nil, fmt.Errorf("Secret %q (env %s) is not in the manifests", ref.Name, e.Name)
		}
		v, ok := s.StringData[ref.Key]
		if d, inData := s.Data[ref.Key]; inData {
			v, ok = string(d), true
		}
		if !ok {
			return nil, fmt.Errorf("env %s: Secret %q has no key %q", e.Name, ref.Name, ref.Key)
		}
		env[e.Name] = v
	}
	return env, nil
}

// checkSecretsOutOfConfigMaps: the state store's secrets (a PostgreSQL URL
// may hold a password) come from a Secret: their values are written in no
// ConfigMap and no container's plain env value.
func (w workload) checkSecretsOutOfConfigMaps(o *objects, cfg *config.Config, c corev1.Container) []string {
	var probs []string
	for key, v := range map[string]string{"state.postgres.url": cfg.State.Postgres.URL.Reveal(), "state.redis.password": cfg.State.Redis.Password.Reveal()} {
		if v == "" {
			continue
		}
		for name, cm := range o.configMaps {
			for file, data := range cm.Data {
				if strings.Contains(data, v) {
					probs = append(probs, fmt.Sprintf("%s is written in ConfigMap %s (%s): take it from a Secret", key, name, file))
				}
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom == nil && strings.Contains(e.Value, v) {
				probs = append(probs, fmt.Sprintf("%s is written in env %s of the pod spec: take it from a Secret", key, e.Name))
			}
		}
	}
	return probs
}

// externalSecrets stand for Secrets a chart's values name but do not
// create (secrets.existingSecret).
var externalSecrets = map[string]*corev1.Secret{}

// checkState: the operation locks outlive pods and rollouts, and no two
// pods hold their own lock file.
func (w workload) checkState(cfg *config.Config) []string {
	var probs []string
	switch cfg.State.Backend {
	case "memory":
		probs = append(probs, "state.backend memory loses every lock when the pod stops")
	case "bolt":
		if w.replicas > 1 {
			probs = append(probs, fmt.Sprintf("%d replicas with state.backend bolt: each keeps its own lock file (use redis)", w.replicas))
		}
		if w.kind == "Deployment" && !w.recreate {
			probs = append(probs, "a rolling Deployment with state.backend bolt runs two pods with two lock files during a rollout (use a StatefulSet, or strategy Recreate)")
		}
		if !w.onPersistentVolume(cfg.State.Path) {
			probs = append(probs, fmt.Sprintf("state.path %s is not on a PersistentVolumeClaim: the locks are lost with the pod", cfg.State.Path))
		}
	}
	return probs
}

// onPersistentVolume reports whether file lies on a mount of a PVC.
func (w workload) onPersistentVolume(file string) bool {
	c, _ := gatewayContainer(w.pod.Spec)
	for _, m := range c.VolumeMounts {
		if m.ReadOnly || !strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") {
			continue
		}
		for _, pvc := range w.claims {
			if pvc.Name == m.Name {
				return true
			}
		}
		for _, v := range w.pod.Spec.Volumes {
			if v.Name == m.Name && v.PersistentVolumeClaim != nil {
				return true
			}
		}
	}
	return false
}

// checkPorts: the container ports and probes match the configuration.
func (w workload) checkPorts(cfg *config.Config, c corev1.Container) []string {
	var probs []string
	want := map[string]string{"osb": cfg.Listen.Address, "admin": cfg.Admin.Address}
	for name, addr := range want {
		if addr == "off" {
			continue
		}
		p, ok := containerPort(c, intstr.FromString(name))
		_, port, _ := net.SplitHostPort(addr)
		if !ok || strconv.Itoa(int(p)) != port {
			probs = append(probs, fmt.Sprintf("container port %q is %d, the configuration listens on %s", name, p, addr))
		}
	}
	for what, pr := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe} {
		wantPath := map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"}[what]
		if pr == nil || pr.HTTPGet == nil {
			probs = append(probs, what+": none (want GET "+wantPath+" on the admin port)")
			continue
		}
		if p, ok := containerPort(c, pr.HTTPGet.Port); !ok || pr.HTTPGet.Path != wantPath {
			probs = append(probs, fmt.Sprintf("%s: GET %s on port %s (%d), want %s on the admin port", what, pr.HTTPGet.Path, pr.HTTPGet.Port.String(), p, wantPath))
		} else if ap, _ := containerPort(c, intstr.FromString("admin")); p != ap {
			probs = append(probs, fmt.Sprintf("%s: port %d is not the admin port %d", what, p, ap))
		}
	}
	return probs
}

// containerPort resolves a port name or number against c's ports.
func containerPort(c corev1.Container, p intstr.IntOrString) (int32, bool) {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// checkAdmin: an admin listener beyond loopback has a token, no Service
// exposes it outside the cluster, and a NetworkPolicy keeps its port to
// named peers.
func (w workload) checkAdmin(o *objects, cfg *config.Config, c corev1.Container) []string {
	if cfg.Admin.Address == "off" {
		return nil
	}
	host, _, _ := net.SplitHostPort(cfg.Admin.Address)
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	var probs []string
	if cfg.Admin.Token.Reveal() == "" && cfg.Admin.TokenFile == "" {
		probs = append(probs, fmt.Sprintf("admin.address %s is reachable from the network but admin.token is not set", cfg.Admin.Address))
	}
	adminPort, _ := containerPort(c, intstr.FromString("admin"))
	for _, svc := range o.services {
		if !selects(svc.Spec.Selector, w.pod.Labels) || svc.Spec.Type == corev1.ServiceTypeClusterIP || svc.Spec.Type == "" {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if p, _ := containerPort(c, sp.TargetPort); p == adminPort {
				probs = append(probs, fmt.Sprintf("Service %s (%s) exposes the admin port outside the cluster", svc.Name, svc.Spec.Type))
			}
		}
	}
	guarded := false
	for _, np := range o.networkPolicies {
		s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !s.Matches(labels.Set(w.pod.Labels)) || !hasIngressPolicy(np) {
			continue
		}
		guarded = true
		for i, rule := range np.Spec.Ingress {
			if len(rule.From) == 0 && rulePorts(rule, c, adminPort) {
				probs = append(probs, fmt.Sprintf("NetworkPolicy %s: ingress[%d] lets anyone reach the admin port", np.Name, i))
			}
		}
	}
	if !guarded {
		probs = append(probs, "no NetworkPolicy selects the pods: the admin port is open to the cluster")
	}
	return probs
}

func hasIngressPolicy(np *networkingv1.NetworkPolicy) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return true // Ingress is implied
	}
	for _, t := range np.Spec.PolicyTypes {
		if t == networkingv1.PolicyTypeIngress {
			return true
		}
	}
	return false
}

// rulePorts reports whether an ingress rule admits port (no ports: all).
func rulePorts(rule networkingv1.NetworkPolicyIngressRule, c corev1.Container, port int32) bool {
	if len(rule.Ports) == 0 {
		return true
	}
	for _, p := range rule.Ports {
		if p.Port == nil {
			return true
		}
		if n, ok := containerPort(c, *p.Port); ok && n == port {
			return true
		}
		if p.Port.Type == intstr.Int && p.EndPort != nil && p.Port.IntVal <= port && port <= *p.EndPort {
			return true
		}
	}
	return false
}

// checkPod: non-root on a read-only root file system, no privilege
// escalation, no capabilities, and time after SIGTERM to leave the
// endpoints (listen.shutdown_delay, or a preStop sleep) and drain that the grace
// period leaves room for.
func (w workload) checkPod(cfg *config.Config, c corev1.Container) []string {
	var probs []string
	ps, cs := w.pod.Spec.SecurityContext, c.SecurityContext
	nonRoot := (cs != nil && cs.RunAsNonRoot != nil && *cs.RunAsNonRoot) || (ps != nil && ps.RunAsNonRoot != nil && *ps.RunAsNonRoot)
	if !nonRoot {
		probs = append(probs, "runAsNonRoot is not set")
	}
	if cs == nil || cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem {
		probs = append(probs, "readOnlyRootFilesystem is not set")
	}
	if cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
		probs = append(probs, "allowPrivilegeEscalation is not false")
	}
	if cs == nil || cs.Capabilities == nil || len(cs.Capabilities.Drop) != 1 || cs.Capabilities.Drop[0] != "ALL" {
		probs = append(probs, "capabilities do not drop ALL")
	}
	preStop := int64(0)
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = c.Lifecycle.PreStop.Sleep.Seconds
	}
	delay := int64(cfg.Listen.ShutdownDelay.Seconds())
	if preStop+delay <= 0 {
		probs = append(probs, "no listen.shutdown_delay (nor preStop sleep): the pod stops accepting before its endpoint leaves the Service")
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := w.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	if need := preStop + delay + int64(cfg.Listen.ShutdownGrace.Seconds()); grace <= need {
		probs = append(probs, fmt.Sprintf("terminationGracePeriodSeconds %d leaves no room for preStop %ds + listen.shutdown_delay %s + listen.shutdown_grace %s",
			grace, preStop, *cfg.Listen.ShutdownDelay, cfg.Listen.ShutdownGrace))
	}
	return probs
}

// selects reports whether a Service selector selects pods with lbls.
func selects(selector, lbls map[string]string) bool {
	return len(selector) > 0 && labels.SelectorFromSet(selector).Matches(labels.Set(lbls))
}
