package deploytest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// scheme knows the built-in Kubernetes kinds and the Prometheus Operator's.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// strict decodes YAML into the registered Go type of its apiVersion and
// kind, refusing unknown and duplicate fields.
var strict = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
	json.SerializerOptions{Yaml: true, Strict: true})

// objects are the Kubernetes objects of one deployment, by kind.
type objects struct {
	all             []runtime.Object
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	statefulSets    []*appsv1.StatefulSet
	deployments     []*appsv1.Deployment
	services        []*corev1.Service
	networkPolicies []*networkingv1.NetworkPolicy
	pdbs            []*policyv1.PodDisruptionBudget
	serviceMonitors []*monitoringv1.ServiceMonitor
	jobs            []*batchv1.Job // the chart's config check (a hook)
}

// decodeObjects splits a multi-document YAML stream and decodes every
// document strictly; a kind the scheme does not know is an error too.
func decodeObjects(name string, stream []byte) (*objects, error) {
	o := &objects{configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if isEmptyYAML(doc) {
			continue
		}
		obj, gvk, err := strict.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %w", name, i, firstLine(doc), err)
		}
		if err := o.add(obj); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %w", name, i, gvk, err)
		}
	}
	return o, nil
}

func (o *objects) add(obj runtime.Object) error {
	o.all = append(o.all, obj)
	switch v := obj.(type) {
	case *corev1.ConfigMap:
		o.configMaps[v.Name] = v
	case *corev1.Secret:
		o.secrets[v.Name] = v
	case *appsv1.StatefulSet:
		o.statefulSets = append(o.statefulSets, v)
	case *appsv1.Deployment:
		o.deployments = append(o.deployments, v)
	case *corev1.Service:
		o.services = append(o.services, v)
	case *networkingv1.NetworkPolicy:
		o.networkPolicies = append(o.networkPolicies, v)
	case *policyv1.PodDisruptionBudget:
		o.pdbs = append(o.pdbs, v)
	case *monitoringv1.ServiceMonitor:
		o.serviceMonitors = append(o.serviceMonitors, v)
	case *batchv1.Job:
		o.jobs = append(o.jobs, v)
	case *corev1.ServiceAccount:
	default:
		return fmt.Errorf("a %T is not expected in a deployment of the gateway", obj)
	}
	return nil
}

// isEmptyYAML reports whether doc holds nothing but comments and space.
func isEmptyYAML(doc []byte) bool {
	for _, line := range strings.Split(string(doc), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && line != "---" {
			return false
		}
	}
	return true
}

func firstLine(doc []byte) string {
	for _, line := range strings.Split(string(doc), "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") && l != "---" {
			return l
		}
	}
	return ""
}

// TestStrictDecodingRefusesMistakes: the decoder the other tests rely on
// refuses a misspelt field, a field of the wrong type and an unknown kind.
func TestStrictDecodingRefusesMistakes(t *testing.T) {
	for name, doc := range map[string]string{
		"misspelt field": "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {selectr: {a: b}}\n",
		"wrong type":     "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: two}\n",
		"unknown kind":   "apiVersion: v1\nkind: Servic\nmetadata: {name: s}\n",
		"duplicate key":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: x, a: y}\n",
	} {
		if _, err := decodeObjects(name, []byte(doc)); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}
