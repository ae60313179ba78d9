package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWarningsNameWeakPasswords: a one-character plain-text password was
// accepted silently; now it draws a warning naming where it is, never what
// it is. Long and bcrypt passwords draw none.
func TestWarningsNameWeakPasswords(t *testing.T) {
	c := &Config{Tenants: []Tenant{{Name: "t", Credentials: []Credential{
		{Username: "a", Password: "x"},
		{Username: "b", Password: "a-long-enough-secret"},
		{Username: "c", Password: "$2a$10$REk4.C.hQcDRQYKRuDFD6ehzTKK7LQ.Ivsd.EFCtrm/Pfd9nai1EG"},
	}}}}
	got := Warnings(c)
	want := []string{"tenants[0].credentials[0].password: a plain-text password shorter than 12 characters (it has 1) is easy to guess; use 12 or more (or a bcrypt hash: osb-gateway hash-password)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	for _, w := range got {
		if strings.Contains(w, `"x"`) {
			t.Errorf("a warning shows the password: %s", w)
		}
	}
}

// TestWarningsNameUnreachableHeapFloor: a heap floor at or above an
// explicit memory limit is never reached as a floor.
func TestWarningsNameUnreachableHeapFloor(t *testing.T) {
	for _, tc := range []struct {
		name string
		rt   Runtime
		want []string
	}{
		{"floor above limit", Runtime{HeapFloor: "1GiB", MemoryLimit: "512MiB"},
			[]string{"runtime.heap_floor: 1GiB is not below runtime.memory_limit 512MiB: the memory limit, not the floor, decides when the GC runs while the heap is small"}},
		{"floor below limit", Runtime{HeapFloor: "64MiB", MemoryLimit: "512MiB"}, nil},
		{"floor off", Runtime{HeapFloor: "0", MemoryLimit: "1MiB"}, nil},
		{"limit auto", Runtime{HeapFloor: "64MiB", MemoryLimit: MemoryLimitAuto}, nil},
		{"limit off", Runtime{HeapFloor: "64MiB", MemoryLimit: MemoryLimitOff}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Warnings(&Config{Runtime: tc.rt})); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWarningsNameSharedBrokerWithoutInventory: a broker two tenants reach
// with its inventory off cannot keep them apart; one tenant's broker, or a
// shared one with its inventory, draws nothing.
func TestWarningsNameSharedBrokerWithoutInventory(t *testing.T) {
	c := &Config{
		Brokers: []Broker{{Name: "shared"}, {Name: "own"}},
		Tenants: []Tenant{
			{Name: "cf", Routes: []Route{{Broker: "shared"}, {Broker: "own"}}},
			{Name: "dev", Routes: []Route{{Broker: "shared"}}},
		},
	}
	c.Brokers[1].Inventory.Disabled = true
	if got := Warnings(c); len(got) != 0 {
		t.Errorf("warnings with the shared broker's inventory on: %q", got)
	}
	c.Brokers[0].Inventory.Disabled = true
	want := []string{`brokers[0].inventory.disabled: tenants ["cf" "dev"] all reach broker "shared", and without its inventory the gateway cannot tell which tenant owns an instance, so any of them can reach the others' instances; keep the inventory on`}
	if diff := cmp.Diff(want, Warnings(c)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}
