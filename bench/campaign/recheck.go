package main

// A run's files are enough to check it again, offline (-recheck DIR):
// <broker>.calls (what the brokers served) and, written before the check,
// ops.json (what the platforms were told: history.jsonl, with each poll's
// state), faults.json (each fault as it really happened), locks.json (every lock the audit saw while the
// run lasted) and views.json (what the brokers, the platforms and the
// gateways held after the drain).

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// views is views.json.
type views struct {
	Store     string                  `json:"store"`
	Held      map[string]string       `json:"held"`    // what the platforms hold, and at which broker
	Brokers   map[string]heldByBroker `json:"brokers"` // what each broker holds
	Inventory map[string]bool         `json:"inventory"`
	Orphans   []string                `json:"orphans"`
	Locks     []string                `json:"locks"`
	Careless  map[string]string       `json:"careless"` // platform number -> style
	Stuck     []violation             `json:"stuck"`    // the drain's own violations
}

type heldByBroker struct {
	Instances []string `json:"instances"`
	Bindings  []string `json:"bindings"`
}

// save writes faults.json, locks.json and views.json into dir.
func save(dir string, v *verdict) error {
	w := views{Store: v.store, Held: v.held, Brokers: map[string]heldByBroker{}, Inventory: v.gw.inventory,
		Orphans: sortedKeys(v.gw.orphans), Locks: v.gw.locks, Careless: map[string]string{}, Stuck: v.violations}
	for name, b := range v.brokers {
		w.Brokers[name] = heldByBroker{Instances: sortedKeys(b.instances), Bindings: sortedKeys(b.bindings)}
	}
	for n, s := range v.careless {
		w.Careless[strconv.Itoa(n)] = s
	}
	for name, x := range map[string]any{"ops.json": v.ops, "faults.json": v.faults, "locks.json": v.audit, "views.json": w} {
		raw, err := json.MarshalIndent(x, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// load reads a run's files in dir back into a verdict not yet checked.
func load(dir string) (*verdict, error) {
	var w views
	v := &verdict{shimmed: map[string]bool{"legacy": true}, fetched: map[string]bool{"legacy": true},
		idempotent: map[string]bool{"legacy": true}, brokers: map[string]*brokerView{}, careless: map[int]string{}}
	for name, x := range map[string]any{"ops.json": &v.ops, "faults.json": &v.faults, "locks.json": &v.audit, "views.json": &w} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("%w (a run saves it before its check)", err)
		}
		if err := json.Unmarshal(raw, x); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	v.store, v.held, v.violations = w.Store, w.Held, w.Stuck
	var err error
	v.gw = &gatewayView{inventory: w.Inventory, orphans: map[string]bool{}, locks: w.Locks}
	for _, k := range w.Orphans {
		v.gw.orphans[k] = true
	}
	for n, s := range w.Careless {
		i, err := strconv.Atoi(n)
		if err != nil {
			return nil, fmt.Errorf("views.json: careless platform %q: %w", n, err)
		}
		v.careless[i] = s
	}
	for name, h := range w.Brokers {
		b := &brokerView{instances: map[string]bool{}, bindings: map[string]bool{}}
		for _, k := range h.Instances {
			b.instances[k] = true
		}
		for _, k := range h.Bindings {
			b.bindings[k] = true
		}
		if b.calls, err = readCallLog(filepath.Join(dir, name+".calls")); err != nil {
			return nil, err
		}
		v.brokers[name] = b
	}
	return v, nil
}

// recheckDir checks the run in dir again and reports as the run did.
func recheckDir(dir string, out io.Writer) (int, error) {
	v, err := load(dir)
	if err != nil {
		return 0, err
	}
	v.check()
	report(out, v, v.ops, v.faults)
	fmt.Fprintf(out, "campaign: rechecked %s: %d operations, %d faults, %d violations\n", dir, len(v.ops), len(v.faults), len(v.violations))
	return len(v.violations), nil
}
