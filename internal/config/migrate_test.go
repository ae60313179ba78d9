package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// migrateYAML routes cf-prod to mysql; %ROUTE% is added to the route,
// %BROKER% to the second broker mysql-v2, %TAIL% at the end.
const migrateYAML = `tenants:
  - name: cf-prod
    credentials:
      - username: cc
        password: platform-password
    routes:
      - broker: mysql
%ROUTE%brokers:
  - name: mysql
    url: https://mysql.example.com
  - name: mysql-v2
    url: https://mysql-v2.example.com
%BROKER%%TAIL%`

// TestMigrateToChecks: routes[].migrate_to names another broker, not
// retired, that the tenant reaches no other way; both keep an inventory in
// a store that outlives the gateway. Each refusal names the key and says
// why.
func TestMigrateToChecks(t *testing.T) {
	tests := []struct {
		name                string
		route, broker, tail string
		want                []string
	}{
		{name: "valid", route: "        migrate_to: mysql-v2\n"},
		{name: "unknown broker", route: "        migrate_to: pg\n",
			want: []string{`tenants[0].routes[0].migrate_to: no broker is named "pg": migrate_to names the broker (in brokers) that takes the route's new instances (line 8)`}},
		{name: "itself", route: "        migrate_to: mysql\n",
			want: []string{`tenants[0].routes[0].migrate_to: is the route's own broker "mysql": name the broker the route's new instances move to (line 8)`}},
		{name: "retired", route: "        migrate_to: mysql-v2\n", broker: "    retired: true\n",
			want: []string{`tenants[0].routes[0].migrate_to: names broker "mysql-v2", which is retired (brokers[].retired): a retired broker takes no new instances (line 8)`}},
		{name: "reached twice", route: "        migrate_to: mysql-v2\n      - broker: mysql-v2\n",
			want: []string{`tenants[0].routes[0].migrate_to: names broker "mysql-v2", which the tenant already reaches (tenants[0].routes[1].broker); a tenant reaches a broker once (line 8)`}},
		{name: "inventory off", route: "        migrate_to: mysql-v2\n", broker: "    inventory: {disabled: true}\n",
			want: []string{`tenants[0].routes[0].migrate_to: needs the inventory of broker "mysql-v2", which is disabled (brokers[].inventory.disabled): the inventory says which broker holds each instance (line 8)`}},
		{name: "memory store", route: "        migrate_to: mysql-v2\n", tail: "state: {backend: memory}\n",
			want: []string{`tenants[0].routes[0].migrate_to: needs state.backend bolt, redis or postgres: the inventory says which broker holds each instance, and memory forgets it at a restart, after which the calls for instances on "mysql-v2" would go to "mysql" (line 8)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.NewReplacer("%ROUTE%", tt.route, "%BROKER%", tt.broker, "%TAIL%", tt.tail).Replace(migrateYAML)
			if diff := cmp.Diff(tt.want, problems(t, doc, nil)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRouteBrokers: a migrating route's instances are on both brokers.
func TestRouteBrokers(t *testing.T) {
	if got := (Route{Broker: "a"}).Brokers(); !cmp.Equal(got, []string{"a"}) {
		t.Errorf("without migrate_to: %q", got)
	}
	if got := (Route{Broker: "a", MigrateTo: "b"}).Brokers(); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("with migrate_to: %q", got)
	}
}
