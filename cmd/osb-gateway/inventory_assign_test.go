package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// assignYAML routes cf-prod to mysql, migrating to mysql-v2.
const assignYAML = `tenants:
  - name: cf-prod
    credentials:
      - username: cc
        password: platform-password
    routes:
      - {broker: mysql, migrate_to: mysql-v2}
brokers:
  - name: mysql
    url: https://mysql.example.com
  - name: mysql-v2
    url: https://mysql-v2.example.com
`

// TestInventoryImportAssign: import -assign stores every line under the
// broker named, whatever the line says, and drops the instance's record
// (bindings included) under the route's other broker, so that the gateway
// sends the instance's calls to the new broker and counts it once. An
// instance the file does not name stays where it is.
func TestInventoryImportAssign(t *testing.T) {
	state, _ := boltState(t)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(assignYAML+"state: "+state+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st := openState(t, path)
	ctx := context.Background()
	var entries []store.Entry
	for _, id := range []string{"i-1", "i-2", "i-stays"} {
		entries = append(entries, store.Entry{Instance: &store.Instance{Broker: "mysql", InstanceID: id, Tenant: "cf-prod", ServiceID: "svc", PlanID: "plan"}},
			store.Entry{Binding: &store.Binding{Broker: "mysql", InstanceID: id, BindingID: "b-" + id, Tenant: "cf-prod"}})
	}
	if _, err := st.Import(ctx, entries, true); err != nil {
		t.Fatal(err)
	}
	st.Close()

	var lines strings.Builder
	for _, id := range []string{"i-1", "i-2"} {
		fmt.Fprintf(&lines, `{"instance":{"broker":"mysql","instance_id":%q,"tenant":"cf-prod","service_id":"svc","plan_id":"plan"}}`+"\n", id)
		fmt.Fprintf(&lines, `{"binding":{"instance_id":%q,"binding_id":"b-%s","tenant":"cf-prod"}}`+"\n", id, id)
	}
	code, stdout, stderr := runArgs(lines.String(), "inventory", "import", "-config", path, "-assign", "mysql-v2", "-")
	want := "imported standard input: 2 instances and 2 bindings read; 4 written, 0 skipped (already stored; -replace overwrites them)\n" +
		`assigned to broker "mysql-v2": 2 instance records moved from broker "mysql"` + "\n"
	if code != 0 || stdout != want || stderr != "" {
		t.Fatalf("import -assign: exit %d, stdout %q (want %q), stderr %q", code, stdout, want, stderr)
	}
	st = openState(t, path)
	defer st.Close()
	for _, id := range []string{"i-1", "i-2"} {
		if _, err := st.GetInstance(ctx, "mysql-v2", id); err != nil {
			t.Errorf("%s under mysql-v2: %v", id, err)
		}
		if _, err := st.GetBinding(ctx, "mysql-v2", id, "b-"+id); err != nil {
			t.Errorf("binding of %s under mysql-v2: %v", id, err)
		}
		if _, err := st.GetInstance(ctx, "mysql", id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s under mysql: %v, want moved away", id, err)
		}
		if _, err := st.GetBinding(ctx, "mysql", id, "b-"+id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("binding of %s under mysql: %v, want moved away", id, err)
		}
	}
	if _, err := st.GetInstance(ctx, "mysql", "i-stays"); err != nil {
		t.Errorf("an instance the file does not name: %v, want it left under mysql", err)
	}

	code, _, stderr = runArgs("", "inventory", "import", "-config", path, "-assign", "nope", "-")
	if code != exitUsage || !strings.Contains(stderr, `-assign "nope": no such broker in the configuration (brokers: mysql, mysql-v2)`) {
		t.Errorf("-assign of an unknown broker: exit %d, %q", code, stderr)
	}
}
