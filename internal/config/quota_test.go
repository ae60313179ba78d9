package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// quotaTenant is the tenant of minimalYAML up to its route; tests add quotas.
const quotaTenant = `tenants:
  - name: cf-prod
    credentials:
      - username: cc
        password: platform-password
    routes:
      - broker: mysql
`

// TestQuotas: tenants[].quotas and tenants[].routes[].quotas decode, and
// what is wrong in them is named with its YAML path.
func TestQuotas(t *testing.T) {
	brokers := "brokers:\n  - name: mysql\n    url: https://mysql.example.com\n"
	tests := []struct {
		name  string
		doc   string
		want  []string // labels of the tenant's quotas, then of its route's
		probs []string
	}{
		{name: "tenant and route quotas",
			doc:  quotaTenant + "        quotas: [{plan: small, max_instances: 2}]\n    quotas:\n      - {service: mysql, plan: small, max_instances: 5}\n      - {max_instances: 20}\n      - {name: big, plan: large, max_instances: 0}\n" + brokers,
			want: []string{"mysql/small", "*/*", "big", "*/small"}},
		{name: "negative max_instances",
			doc:   quotaTenant + "    quotas: [{service: mysql, max_instances: -1}]\n" + brokers,
			probs: []string{"tenants[0].quotas[0].max_instances: must not be negative (line 8)"}},
		{name: "max_instances missing",
			doc:   quotaTenant + "    quotas: [{service: mysql}]\n" + brokers,
			probs: []string{"tenants[0].quotas[0].max_instances: is required (line 8)"}},
		{name: "same label twice",
			doc:   quotaTenant + "    quotas: [{service: mysql, max_instances: 1}, {service: mysql, max_instances: 2}]\n" + brokers,
			probs: []string{`tenants[0].quotas[1]: names the quota "mysql/*" again (first at tenants[0].quotas[0]): give one of them a distinct name (line 8)`}},
		{name: "broker without inventory",
			doc:   quotaTenant + "    quotas: [{max_instances: 1}]\n" + brokers + "    inventory: {disabled: true}\n",
			probs: []string{`tenants[0].quotas[0]: counts instances of broker "mysql", whose inventory is disabled (brokers[0].inventory.disabled): the gateway would have nothing to count (line 8)`}},
		{name: "unknown key",
			doc:   quotaTenant + "    quotas: [{service: mysql, max: 1}]\n" + brokers,
			probs: []string{"tenants[0].quotas[0].max_instances: is required (line 8)", "tenants[0].quotas[0].max: unknown key (line 8)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.probs != nil {
				if diff := cmp.Diff(tt.probs, problems(t, tt.doc, nil)); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
				return
			}
			cfg, err := Parse([]byte(tt.doc), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, q := range cfg.Tenants[0].Quotas {
				got = append(got, q.Label())
			}
			for _, q := range cfg.Tenants[0].Routes[0].Quotas {
				got = append(got, q.Label())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}
