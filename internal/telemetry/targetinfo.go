package telemetry

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/sdk/resource"
)

// targetInfo is the target_info gauge (always 1) whose labels are the
// resource's attributes (service.name, service.version,
// service.instance.id, telemetry.sdk.*, the configured ones), named as
// OpenTelemetry's Prometheus compatibility rules name them: characters a
// label name cannot hold become "_" (runs collapsed), a leading digit gets
// "key_", and attributes that end up with the same name have their values
// sorted and joined with ";".
func targetInfo(res *resource.Resource) prometheus.Collector {
	values := map[string][]string{}
	for _, kv := range res.Attributes() {
		name := labelName(string(kv.Key))
		if name != "" {
			values[name] = append(values[name], kv.Value.String())
		}
	}
	labels := make(prometheus.Labels, len(values))
	for n, vs := range values {
		slices.Sort(vs)
		labels[n] = strings.Join(vs, ";")
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "target_info", Help: "Target metadata", ConstLabels: labels})
	g.Set(1)
	return g
}

// labelName turns an attribute key into a Prometheus label name, or ""
// when nothing of it is left.
func labelName(key string) string {
	var b strings.Builder
	under := false
	for _, r := range key {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !ok || r == '_' {
			if !under {
				b.WriteByte('_')
			}
			under = true
			continue
		}
		b.WriteRune(r)
		under = false
	}
	name := b.String()
	if strings.Trim(name, "_") == "" {
		return ""
	}
	if name[0] >= '0' && name[0] <= '9' {
		name = "key_" + name
	}
	return name
}
