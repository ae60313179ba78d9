package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/seal"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// inventoryMarker is the plaintext of the secrets the inventory tests
// seal: export output and messages may hold the sealed bytes, never it.
const inventoryMarker = "MARKER-cli-0c4d-hunter2"

// inventoryConfig writes a gateway.yaml with brokers mysql and pg, tenants
// cf-prod and cf-dev and the state section state, and returns its path.
func inventoryConfig(t *testing.T, state string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(checkValidYAML+"state: "+state+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// boltState is the state section of a bolt file in a new directory.
func boltState(t *testing.T) (state, file string) {
	file = filepath.Join(t.TempDir(), "state.db")
	return fmt.Sprintf("{backend: bolt, path: %q}", file), file
}

// redisState is the state section of srv under key prefix prefix.
func redisState(srv *storetest.Redis, prefix string) string {
	return fmt.Sprintf("{backend: redis, redis: {addrs: [%q], key_prefix: %q}}", srv.Addr, prefix)
}

// openState opens the state store of the configuration at path, as the
// gateway would.
func openState(t *testing.T, path string) store.Store {
	t.Helper()
	cfg, code, ok := loadForInventory(path, "test", os.Stderr)
	if !ok {
		t.Fatalf("config %s: exit %d", path, code)
	}
	st, err := backend.Open(storeConfig(cfg.State), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// fillInventory stores n instances of mysql and pg, each with a binding,
// as Cloud Controller leaves them: contexts, GUIDs, a dashboard URL,
// sealed parameters and credentials holding inventoryMarker, expiry.
func fillInventory(t *testing.T, st store.Store, n int) {
	t.Helper()
	keys, err := seal.New(bytes.Repeat([]byte{3}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	sealed := func(what string) []byte {
		b, err := keys.Seal([]byte(`{"password":"`+inventoryMarker+`"}`), []byte(what))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t0 := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
	var entries []store.Entry
	for i := range n {
		broker, tenant := []string{"mysql", "pg"}[i%2], []string{"cf-prod", "cf-dev"}[i%2]
		id := fmt.Sprintf("8c2f1e7a-%04d-4b6e-9d1a-5f3c2b1a0e9d", i)
		in := store.Instance{Broker: broker, InstanceID: id, Tenant: tenant, ServiceID: "svc-" + broker, PlanID: "plan-small",
			Context: json.RawMessage(`{"platform":"cloudfoundry","organization_guid":"org-` + id[:8] +
				`","space_guid":"space-1","instance_name":"db <&> ` + id[9:13] + `"}`),
			OrganizationGUID: "org-" + id[:8], SpaceGUID: "space-1", DashboardURL: "https://" + broker + ".example.com/d/" + id,
			MaintenanceInfo: json.RawMessage(`{"version":"8.0.36"}`), SealedParameters: sealed("p" + id),
			LastOperation: store.LastOperation{Kind: store.KindProvision, State: store.StateSucceeded, Operation: "op-" + id,
				Status: 200, Started: t0, Ended: t0.Add(time.Minute)},
			Created: t0, Updated: t0.Add(time.Minute)}
		bd := store.Binding{Broker: broker, InstanceID: id, BindingID: "bind-" + id[9:13], Tenant: tenant, AppGUID: "app-" + id[9:13],
			BindResource:     json.RawMessage(`{"app_guid":"app-` + id[9:13] + `"}`),
			SealedParameters: sealed("bp" + id), SealedCredentials: sealed("bc" + id),
			ExpiresAt: t0.Add(time.Duration(i) * time.Hour), Created: t0, Updated: t0}
		entries = append(entries, store.Entry{Instance: &in}, store.Entry{Binding: &bd})
	}
	if _, err := st.Import(context.Background(), entries, true); err != nil {
		t.Fatal(err)
	}
}

// exportAll reads every record of st.
func exportAll(t *testing.T, st store.Store) []store.Entry {
	t.Helper()
	var out []store.Entry
	for e, err := range st.Export(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func runArgs(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errs bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errs)
	return code, out.String(), errs.String()
}

// TestInventoryExportImportRoundTrip: export → import into an empty store
// → export gives the same lines and the same records, on bolt and on a
// real redis-server, across more than one import batch.
func TestInventoryExportImportRoundTrip(t *testing.T) {
	const n = importBatch/2 + 100 // entries: 2n, over one batch
	srv := storetest.StartRedis(t)
	for _, tc := range []struct {
		name     string
		from, to func(t *testing.T) string
	}{
		{"bolt", func(t *testing.T) string { s, _ := boltState(t); return s }, func(t *testing.T) string { s, _ := boltState(t); return s }},
		{"redis", func(*testing.T) string { return redisState(srv, "from:") }, func(*testing.T) string { return redisState(srv, "to:") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to := inventoryConfig(t, tc.from(t)), inventoryConfig(t, tc.to(t))
			st := openState(t, from)
			fillInventory(t, st, n)
			want := exportAll(t, st)
			st.Close()

			dump := filepath.Join(t.TempDir(), "inventory.jsonl")
			code, stdout, stderr := runArgs("", "inventory", "export", "-config", from, "-o", dump)
			if code != 0 || stdout != "" || stderr != fmt.Sprintf("exported %d instances and %d bindings to %s\n", n, n, dump) {
				t.Fatalf("export: exit %d, stdout %q, stderr %q", code, stdout, stderr)
			}
			if fi, err := os.Stat(dump); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("export file: %v, mode %v; want 0600", err, fi.Mode())
			}
			lines, _ := os.ReadFile(dump)
			if got := bytes.Count(lines, []byte("\n")); got != 2*n {
				t.Errorf("export wrote %d lines, want %d", got, 2*n)
			}
			if bytes.Contains(lines, []byte(inventoryMarker)) {
				t.Error("the export holds a sealed secret's plaintext")
			}

			code, stdout, stderr = runArgs("", "inventory", "import", "-config", to, dump)
			if wantOut := fmt.Sprintf("imported %s: %d instances and %d bindings read; %d written, 0 skipped (already stored; -replace overwrites them)\n",
				dump, n, n, 2*n); code != 0 || stdout != wantOut || stderr != "" {
				t.Fatalf("import: exit %d, stdout %q (want %q), stderr %q", code, stdout, wantOut, stderr)
			}
			st = openState(t, to)
			got := exportAll(t, st)
			st.Close()
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("records after export and import (-exported +imported):\n%s", d)
			}
			// And the export of the copy is the same file, to the byte.
			code, again, _ := runArgs("", "inventory", "export", "-config", to)
			if code != 0 || again != string(lines) {
				t.Errorf("export of the imported copy: exit %d, the same lines: %t", code, again == string(lines))
			}
			// Importing again keeps every record (counted as skipped);
			// from standard input too.
			code, stdout, _ = runArgs(string(lines), "inventory", "import", "-config", to, "-")
			if code != 0 || !strings.Contains(stdout, fmt.Sprintf("; 0 written, %d skipped", 2*n)) {
				t.Errorf("second import from standard input: exit %d, %q", code, stdout)
			}
		})
	}
}

// TestInventoryBoltHeld: a bolt file a running gateway holds cannot be
// opened; export and import say so, and what to do instead, within the
// short open timeout. -dry-run needs no store and works meanwhile.
func TestInventoryBoltHeld(t *testing.T) {
	state, _ := boltState(t)
	path := inventoryConfig(t, state)
	held := openState(t, path) // the running gateway
	defer held.Close()
	line := `{"instance":{"broker":"mysql","instance_id":"i1"}}` + "\n"
	file := filepath.Join(t.TempDir(), "in.jsonl")
	os.WriteFile(file, []byte(line), 0o600)
	for _, args := range [][]string{{"inventory", "export", "-config", path}, {"inventory", "import", "-config", path, file}} {
		start := time.Now()
		code, stdout, stderr := runArgs("", args...)
		if code != 1 || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want 1 and nothing", args, code, stdout)
		}
		for _, want := range []string{"is locked by another process", "stop the gateway first", "GET /admin/instances"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr lacks %q: %s", args, want, stderr)
			}
		}
		if took := time.Since(start); took > inventoryOpenTimeout+5*time.Second {
			t.Errorf("%v took %s", args, took)
		}
	}
	code, stdout, stderr := runArgs("", "inventory", "import", "-config", path, "-dry-run", file)
	if code != 0 || stdout != "checked "+file+": 1 instance and 0 bindings, all valid; nothing stored (-dry-run)\n" {
		t.Errorf("dry run while the file is held: exit %d, %q %q", code, stdout, stderr)
	}
}

// TestInventoryImportRefusals: a line that is not an entry stops the
// import, naming the line and what was stored before it.
func TestInventoryImportRefusals(t *testing.T) {
	state, _ := boltState(t)
	path := inventoryConfig(t, state)
	good := func(i int) string {
		return fmt.Sprintf(`{"instance":{"broker":"mysql","instance_id":"i%04d","tenant":"cf-prod"}}`, i)
	}
	// A batch of good lines, then one more batch whose bad entry the store
	// refuses: the first batch is stored, nothing of the second.
	var many []string
	for i := range importBatch + 10 {
		many = append(many, good(i))
	}
	many[importBatch+5] = `{"instance":{"broker":"mysql","instance_id":"bad","last_operation":{"kind":"explode","state":"succeeded"}}}`
	for _, tc := range []struct {
		name, input, want string
		stored            int
	}{
		{"unknown field", good(1) + "\n\n" + `{"instance":{"broker":"mysql","instanceid":"x"}}`,
			`line 3: not an inventory entry: json: unknown field "instanceid"; the 0 entries before line 1 were stored`, 0},
		{"no broker", `{"binding":{"instance_id":"i","binding_id":"b"}}`, `line 1: no "broker": every entry names its broker`, 0},
		{"no binding id", `{"binding":{"broker":"pg","instance_id":"i"}}`, `line 1: no "binding_id"`, 0},
		{"both", `{"instance":{"broker":"pg","instance_id":"i"},"binding":{"broker":"pg","instance_id":"i","binding_id":"b"}}`,
			`line 1: want exactly one of "instance" and "binding"`, 0},
		{"unknown broker", `{"instance":{"broker":"mysq","instance_id":"i"}}`,
			`line 1: broker "mysq" is not in the configuration (brokers: mysql, pg)`, 0},
		{"unknown tenant", `{"instance":{"broker":"pg","instance_id":"i","tenant":"cf-test"}}`,
			`line 1: tenant "cf-test" is not in the configuration`, 0},
		{"two values", good(1) + good(2), "line 1: more than one JSON value on the line", 0},
		{"the store refuses", strings.Join(many, "\n"), fmt.Sprintf(`line %d: instance mysql/bad: store: invalid: last operation has Kind "explode"; the %d entries before line %d were stored`,
			importBatch+6, importBatch, importBatch+1), importBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openState(t, path)
			for e, err := range st.Export(context.Background()) { // empty the store
				if err != nil {
					t.Fatal(err)
				}
				st.DeleteInstance(context.Background(), e.Instance.Broker, e.Instance.InstanceID)
			}
			st.Close()
			code, stdout, stderr := runArgs(tc.input, "inventory", "import", "-config", path, "-")
			if code != 1 || stdout != "" || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, stdout, stderr, tc.want)
			}
			st = openState(t, path)
			defer st.Close()
			if n, _ := st.CountInstances(context.Background(), store.InstanceFilter{}); n != tc.stored {
				t.Errorf("%d instances stored, want %d", n, tc.stored)
			}
		})
	}
}

// TestInventoryUsage: usage errors exit 2, a memory store 1.
func TestInventoryUsage(t *testing.T) {
	state, _ := boltState(t)
	path := inventoryConfig(t, state)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"inventory"}, 2, "usage: osb-gateway inventory"},
		{[]string{"inventory", "dump"}, 2, `unknown command "dump"`},
		{[]string{"inventory", "import", "-config", path}, 2, "want one FILE"},
		{[]string{"inventory", "export", "-config", path, "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"inventory", "export", "-config", filepath.Join(t.TempDir(), "none.yaml")}, 2, "none.yaml"},
		{[]string{"inventory", "import", "-config", path, filepath.Join(t.TempDir(), "none.jsonl")}, 1, "none.jsonl"},
		{[]string{"inventory", "export", "-config", inventoryConfig(t, "{backend: memory}")}, 1, "state.backend is memory"},
	} {
		code, _, stderr := runArgs("", tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
}
