package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
)

// maxImportLine bounds one line of an import: a record is at most
// store.MaxRecordLen bytes, and base64 and JSON escapes grow it.
const maxImportLine = 8 << 20

// runInventoryImport stores the JSON lines of a file in the inventory.
func runInventoryImport(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("inventory import", "inventory import [-config FILE] [-replace] [-dry-run] [-assign BROKER] FILE|-\n\n"+
		"Stores the JSON lines of FILE (- : standard input) in the inventory (see osb-gateway inventory -h).", stderr)
	path := fs.String("config", "gateway.yaml", "the configuration `file` naming the state store and the brokers")
	replace := fs.Bool("replace", false, "overwrite records already stored (without it they are kept and counted as skipped)")
	dry := fs.Bool("dry-run", false, "read and check every line, store nothing (needs no access to the state store)")
	assign := fs.String("assign", "", "store every entry under this `broker`, whatever its line says, and drop the instance's record under "+
		"the other broker of a route migrating between the two (routes[].migrate_to): the instance has moved")
	if code, ok := parseFlags(fs, args, true); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "osb-gateway inventory import: want one FILE (or - for standard input), got %d arguments\n\n%s",
			fs.NArg(), inventoryUsage)
		return exitUsage
	}
	cfg, code, ok := loadForInventory(*path, "inventory import", stderr)
	if !ok {
		return code
	}
	name := fs.Arg(0)
	in := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "osb-gateway inventory import: %v\n", err)
			return exitFailed
		}
		defer f.Close()
		in = f
	} else {
		name = "standard input"
	}
	ctx := context.Background()
	imp := &importer{cfg: cfg, replace: *replace, assign: *assign}
	if *assign != "" && cfg.Broker(*assign) == nil {
		fmt.Fprintf(stderr, "osb-gateway inventory import: -assign %q: no such broker in the configuration (brokers: %s)\n", *assign, strings.Join(imp.brokerNames(), ", "))
		return exitUsage
	}
	if !*dry {
		st, err := openInventory(ctx, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "osb-gateway inventory import: %v\n", err)
			return exitFailed
		}
		defer st.Close()
		imp.st = st
	}
	if err := imp.run(ctx, in); err != nil {
		fmt.Fprintf(stderr, "osb-gateway inventory import: %s: %v\n", name, err)
		return exitFailed
	}
	read := plural(imp.instances, "instance") + " and " + plural(imp.bindings, "binding")
	if *dry {
		fmt.Fprintf(stdout, "checked %s: %s, all valid; nothing stored (-dry-run)\n", name, read)
		return exitOK
	}
	fmt.Fprintf(stdout, "imported %s: %s read; %d written, %d skipped (already stored; -replace overwrites them)\n",
		name, read, imp.res.Written, imp.res.Skipped)
	if imp.assign != "" {
		fmt.Fprintf(stdout, "assigned to broker %q: %s moved from %s\n", imp.assign, plural(imp.moved, "instance record"), movedFrom(imp.cfg, imp.assign))
	}
	return exitOK
}

// importer reads entries and stores them a batch at a time.
type importer struct {
	cfg     *config.Config
	st      store.Store // nil: a dry run, batches are checked only
	replace bool
	// assign: every entry is stored under this broker, and the record of
	// each instance under the brokers it moves from (movedFrom) dropped;
	// moved counts those dropped.
	assign string
	moved  int

	batch               []store.Entry
	lines               []int // the line of each entry of batch
	instances, bindings int
	stored              int // entries of earlier batches, stored
	res                 store.ImportResult
}

// run reads in to the end, storing every importBatch entries.
func (imp *importer) run(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxImportLine)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		e, err := imp.decode(text)
		if err != nil {
			return imp.stopped(line, err)
		}
		imp.batch, imp.lines = append(imp.batch, e), append(imp.lines, line)
		if len(imp.batch) == importBatch {
			if err := imp.flush(ctx); err != nil {
				return err
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("longer than %d bytes", maxImportLine)
		}
		return imp.stopped(line+1, err)
	}
	return imp.flush(ctx)
}

// decode reads one line: one entry, with exactly one of instance and
// binding, naming a configured broker (and tenant), with its ids. Unknown
// fields are refused: a misspelt field would otherwise be lost silently.
func (imp *importer) decode(text []byte) (store.Entry, error) {
	var e store.Entry
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, fmt.Errorf("not an inventory entry: %w", err)
	}
	if dec.More() {
		return e, errors.New("more than one JSON value on the line; want one entry per line")
	}
	var broker, tenant string
	var ids []string
	switch {
	case (e.Instance == nil) == (e.Binding == nil):
		return e, errors.New(`want exactly one of "instance" and "binding"`)
	case imp.assign != "" && e.Instance != nil:
		e.Instance.Broker = imp.assign
	case imp.assign != "":
		e.Binding.Broker = imp.assign
	}
	switch {
	case e.Instance != nil:
		broker, tenant = e.Instance.Broker, e.Instance.Tenant
		ids = []string{"instance_id", e.Instance.InstanceID}
		imp.instances++
	default:
		broker, tenant = e.Binding.Broker, e.Binding.Tenant
		ids = []string{"instance_id", e.Binding.InstanceID, "binding_id", e.Binding.BindingID}
		imp.bindings++
	}
	if broker == "" {
		return e, errors.New(`no "broker": every entry names its broker as gateway.yaml does`)
	}
	for i := 0; i < len(ids); i += 2 {
		if ids[i+1] == "" {
			return e, fmt.Errorf("no %q: every entry carries the ids the platform used", ids[i])
		}
	}
	if imp.cfg.Broker(broker) == nil {
		return e, fmt.Errorf("broker %q is not in the configuration (brokers: %s)", broker, strings.Join(imp.brokerNames(), ", "))
	}
	if tenant != "" && imp.cfg.Tenant(tenant) == nil {
		return e, fmt.Errorf("tenant %q is not in the configuration", tenant)
	}
	return e, nil
}

func (imp *importer) brokerNames() []string {
	var names []string
	for _, b := range imp.cfg.Brokers {
		names = append(names, b.Name)
	}
	return names
}

// flush stores the batch. An entry the store refuses is named by its
// line; nothing of its batch is stored then.
func (imp *importer) flush(ctx context.Context) error {
	if len(imp.batch) == 0 {
		return nil
	}
	var res store.ImportResult
	var err error
	if imp.st == nil {
		err = checkEntries(ctx, imp.batch)
	} else {
		res, err = imp.st.Import(ctx, imp.batch, imp.replace)
	}
	switch {
	case errors.Is(err, store.ErrInvalid):
		line, cause := imp.locate(ctx)
		return imp.stopped(line, cause)
	case err != nil:
		return fmt.Errorf("storing lines %d to %d: %w (some of them may be stored; %d entries before them were; "+
			"importing the file again is harmless)", imp.lines[0], imp.lines[len(imp.lines)-1], err, imp.stored)
	}
	if err := imp.move(ctx); err != nil {
		return err
	}
	imp.stored += len(imp.batch)
	imp.res.Written += res.Written
	imp.res.Skipped += res.Skipped
	imp.batch, imp.lines = imp.batch[:0], imp.lines[:0]
	return nil
}

// checkEntries validates entries as the store does, storing them nowhere
// that lasts.
func checkEntries(ctx context.Context, entries []store.Entry) error {
	scratch, err := backend.Open(store.Config{Backend: store.BackendMemory}, nil)
	if err != nil {
		return err
	}
	defer scratch.Close()
	_, err = scratch.Import(ctx, entries, true)
	return err
}

// locate finds the first entry of the batch the store refuses, and why.
func (imp *importer) locate(ctx context.Context) (int, error) {
	scratch, err := backend.Open(store.Config{Backend: store.BackendMemory}, nil)
	if err != nil {
		return imp.lines[0], err
	}
	defer scratch.Close()
	for i, e := range imp.batch {
		if e.Instance != nil {
			_, err = scratch.PutInstance(ctx, *e.Instance)
		} else {
			_, err = scratch.PutBinding(ctx, *e.Binding)
		}
		if err != nil {
			return imp.lines[i], err
		}
	}
	return imp.lines[0], errors.New("the state store refused this batch, and no entry of it alone")
}

// stopped is the error of an import that stopped at line.
func (imp *importer) stopped(line int, err error) error {
	if imp.st == nil {
		return fmt.Errorf("line %d: %w (nothing stored: -dry-run)", line, err)
	}
	return fmt.Errorf("line %d: %w; the %d entries before line %d were stored, nothing from it on "+
		"(fix it and import again: records already stored are kept without -replace)", line, err, imp.stored, firstOf(imp.lines, line))
}

// firstOf is the first line of the batch not stored, or line.
func firstOf(lines []int, line int) int {
	if len(lines) > 0 {
		return lines[0]
	}
	return line
}

// movedFromBrokers names the brokers an instance assigned to broker moves
// from: the other broker of each route migrating between the two.
func movedFromBrokers(cfg *config.Config, broker string) []string {
	var out []string
	for _, t := range cfg.Tenants {
		for _, rc := range t.Routes {
			switch {
			case rc.MigrateTo == broker && !slices.Contains(out, rc.Broker):
				out = append(out, rc.Broker)
			case rc.MigrateTo != "" && rc.Broker == broker && !slices.Contains(out, rc.MigrateTo):
				out = append(out, rc.MigrateTo)
			}
		}
	}
	return out
}

// movedFrom is movedFromBrokers for a message.
func movedFrom(cfg *config.Config, broker string) string {
	from := movedFromBrokers(cfg, broker)
	if len(from) == 0 {
		return "no broker (no route migrates to or from it)"
	}
	return "broker " + strings.Join(quoteAll(from), ", ")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// move drops, with -assign, the record (and bindings) of each instance of
// the stored batch under the brokers it moves from, so that the gateway
// sends its calls to the assigned broker and counts it once.
func (imp *importer) move(ctx context.Context) error {
	if imp.assign == "" || imp.st == nil {
		return nil
	}
	from := movedFromBrokers(imp.cfg, imp.assign)
	for i, e := range imp.batch {
		if e.Instance == nil {
			continue
		}
		for _, b := range from {
			_, err := imp.st.DeleteInstance(ctx, b, e.Instance.InstanceID)
			switch {
			case err == nil:
				imp.moved++
			case !errors.Is(err, store.ErrNotFound):
				return fmt.Errorf("line %d: dropping instance %q of broker %q: %w (the lines before it were stored and moved; importing the file again is harmless)",
					imp.lines[i], e.Instance.InstanceID, b, err)
			}
		}
	}
	return nil
}
