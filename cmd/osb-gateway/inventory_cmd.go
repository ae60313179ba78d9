package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
)

const inventoryUsage = `usage: osb-gateway inventory <command> [flags]

commands:
  export [-config FILE] [-o FILE]
                   write every record of the inventory in the state store that
                   gateway.yaml names, one JSON object per line (standard output
                   without -o)
  import [-config FILE] [-replace] [-dry-run] [-assign BROKER] FILE|-
                   store the JSON lines of FILE (- : standard input) in that
                   inventory, 1,000 at a time; records already stored are kept
                   unless -replace; -assign stores every line under BROKER and
                   drops the instance's record under the other broker of a
                   route migrating between the two (routes[].migrate_to)

Each line is {"instance":{...}} or {"binding":{...}}, the fields of
GET /admin/instances/{broker}/{id}. Import is how an operator adopts a broker
that already has instances: write one line per instance and binding, with at
least the broker (its name in gateway.yaml) and the ids the platform used:

  {"instance":{"broker":"mysql","instance_id":"ID","tenant":"cf-prod","service_id":"SVC","plan_id":"PLAN"}}
  {"binding":{"broker":"mysql","instance_id":"ID","binding_id":"BID","tenant":"cf-prod","app_guid":"APP"}}

Leave sealed_parameters and sealed_credentials out of hand-written lines: only
an export carries them (sealed under inventory.key_file).

A bolt file is locked by the one process that opens it: with state.backend
bolt, stop the gateway before export or import (or read a running gateway's
inventory with GET /admin/instances). Redis can be exported and imported while
the gateway runs.

exit codes: 0 done, 1 failed (the state store, an entry, a file), 2 usage or an
unreadable configuration file.
`

// inventoryOpenTimeout is how long export and import wait for a bolt file
// another process holds.
const inventoryOpenTimeout = time.Second

// importBatch is how many entries import stores at a time.
const importBatch = 1000

// runInventory runs "osb-gateway inventory export|import" and returns the
// exit code.
func runInventory(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, inventoryUsage)
		return exitUsage
	}
	switch args[0] {
	case "export":
		return runInventoryExport(args[1:], stdout, stderr)
	case "import":
		return runInventoryImport(args[1:], stdin, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, inventoryUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "osb-gateway inventory: unknown command %q\n\n%s", args[0], inventoryUsage)
	return exitUsage
}

// loadForInventory loads the configuration as check does: its problems go
// to stderr, one a line.
func loadForInventory(path, cmd string, stderr io.Writer) (*config.Config, int, bool) {
	cfg, err := config.Load(path)
	var probs *config.Problems
	switch {
	case errors.As(err, &probs):
		for _, p := range probs.List {
			fmt.Fprintf(stderr, "%s: %s\n", path, p)
		}
		fmt.Fprintf(stderr, "%s: %s\n", path, plural(probs.Len(), "problem"))
		return nil, exitFailed, false
	case err != nil:
		fmt.Fprintf(stderr, "osb-gateway %s: %v\n", cmd, err)
		return nil, exitUsage, false
	}
	return cfg, exitOK, true
}

// openInventory opens the state store of cfg for export or import and
// checks that it answers.
func openInventory(ctx context.Context, cfg *config.Config) (store.Store, error) {
	return openStateFor(ctx, cfg, "read its inventory through the admin API (GET /admin/instances)")
}

// openStateFor is openInventory, whose refusal of a bolt file the running
// gateway holds says what to do instead: instead, such as "read its usage
// report through the admin API (GET /admin/usage)".
func openStateFor(ctx context.Context, cfg *config.Config, instead string) (store.Store, error) {
	sc := cfg.State
	if sc.Backend == store.BackendMemory {
		return nil, errors.New("state.backend is memory: the inventory lives in the gateway's process and ends with it; " +
			"there is nothing to export or import (read it with GET /admin/instances)")
	}
	scfg := storeConfig(sc)
	scfg.OpenTimeout = inventoryOpenTimeout
	st, err := backend.Open(scfg, time.Now)
	switch {
	case errors.Is(err, store.ErrUnavailable) && sc.Backend == store.BackendBolt:
		return nil, fmt.Errorf("the bolt file %s is locked by another process, most likely the running gateway "+
			"(bbolt lets one process open it): stop the gateway first, or %s while it runs (%w)", sc.Path, instead, err)
	case err != nil:
		return nil, fmt.Errorf("state (%s): %w", sc.Backend, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := st.Ping(pctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("state (%s) does not answer: %w", sc.Backend, err)
	}
	return st, nil
}

// runInventoryExport writes every record as a JSON line.
func runInventoryExport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("inventory export", "inventory export [-config FILE] [-o FILE]\n\n"+
		"Writes every record of the inventory as JSON lines (see osb-gateway inventory -h).", stderr)
	path := fs.String("config", "gateway.yaml", "the configuration `file` naming the state store")
	out := fs.String("o", "", "write to this `file` (created with mode 0600) instead of standard output")
	if code, ok := parseFlags(fs, args, false); !ok {
		return code
	}
	cfg, code, ok := loadForInventory(*path, "inventory export", stderr)
	if !ok {
		return code
	}
	ctx := context.Background()
	st, err := openInventory(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway inventory export: %v\n", err)
		return exitFailed
	}
	defer st.Close()
	w, dest := stdout, "standard output"
	var f *os.File
	if *out != "" {
		if f, err = os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err != nil {
			fmt.Fprintf(stderr, "osb-gateway inventory export: %v\n", err)
			return exitFailed
		}
		w, dest = f, *out
	}
	n, err := exportTo(ctx, st, w)
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway inventory export: %v (after %s and %s: the output is incomplete)\n", err,
			plural(n.instances, "instance"), plural(n.bindings, "binding"))
		return exitFailed
	}
	fmt.Fprintf(stderr, "exported %s and %s to %s\n", plural(n.instances, "instance"), plural(n.bindings, "binding"), dest)
	return exitOK
}

// exported counts what an export wrote.
type exported struct{ instances, bindings int }

// exportTo writes st's export to w, one JSON line per entry.
func exportTo(ctx context.Context, st store.Store, w io.Writer) (exported, error) {
	var n exported
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for e, err := range st.Export(ctx) {
		if err != nil {
			return n, err
		}
		if err := enc.Encode(e); err != nil {
			return n, err
		}
		if e.Instance != nil {
			n.instances++
		} else {
			n.bindings++
		}
	}
	return n, bw.Flush()
}
