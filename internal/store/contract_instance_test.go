package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// The contract of binding locks and of List by instance.

func TestBindingLockKey(t *testing.T) {
	if got, want := BindingLockKey("b1", "i1", "x1"), LockKey("b1", "i1")+"/x1"; got != want {
		t.Errorf("BindingLockKey = %q, want %q", got, want)
	}
}

// instanceLock is a lock on instance id of broker for tenant, or on its
// binding if binding is set.
func instanceLock(broker, id, binding, tenant string, ttl time.Duration) Lock {
	l := testLock(id, "owner-"+broker+"-"+id+"-"+binding, ttl)
	l.Key, l.Broker, l.Tenant = LockKey(broker, id), broker, tenant
	if binding != "" {
		l.Key, l.Kind, l.BindingID = BindingLockKey(broker, id, binding), KindBind, binding
	}
	return l
}

func testListInstance(t *testing.T, b backend) {
	ctx := context.Background()
	c := osbtest.NewClock(t0)
	s := b.open(t, c.Now)
	acquire := func(l Lock) Lock { t.Helper(); return mustAcquire(t, s, l) }
	i1 := acquire(instanceLock("b1", "i1", "", "x", time.Hour))
	// Binding locks sit beside the instance lock: all are held at once.
	x1 := acquire(instanceLock("b1", "i1", "x1", "x", time.Hour))
	x2 := acquire(instanceLock("b1", "i1", "x2", "y", time.Hour))
	acquire(instanceLock("b1", "i1", "x3", "x", time.Minute)) // expires below
	acquire(instanceLock("b1", "i10", "", "x", time.Hour))    // an id extending i1
	acquire(instanceLock("b1", "i10", "x1", "x", time.Hour))
	acquire(instanceLock("b1", "i1-a", "", "x", time.Hour)) // sorts between b1/i1 and b1/i1/
	acquire(instanceLock("b2", "i1", "", "x", time.Hour))
	acquire(instanceLock("b1", "i2", "x1", "x", time.Hour))
	// Broker "b1/i1", instance "z": key b1/i1/z, under b1/i1's prefix, but
	// not a lock of broker b1.
	slash := acquire(instanceLock("b1/i1", "z", "", "x", time.Hour))
	// Glob metacharacters in ids, and a lock their unescaped pattern
	// would match.
	glob := acquire(instanceLock("g[1]*", `i?\`, "", "x", time.Hour))
	globX := acquire(instanceLock("g[1]*", `i?\`, "x*", "x", time.Hour))
	acquire(instanceLock("g1x", `iZ`, "", "x", time.Hour))
	c.Advance(time.Minute)

	tests := []struct {
		name string
		f    ListFilter
		want []Lock
	}{
		{"instance and its bindings", ListFilter{Broker: "b1", InstanceID: "i1"}, []Lock{i1, x1, x2}},
		{"and tenant", ListFilter{Broker: "b1", InstanceID: "i1", Tenant: "y"}, []Lock{x2}},
		{"broker with a slash", ListFilter{Broker: "b1/i1", InstanceID: "z"}, []Lock{slash}},
		{"glob characters", ListFilter{Broker: "g[1]*", InstanceID: `i?\`}, []Lock{glob, globX}},
		{"only bindings", ListFilter{Broker: "b1", InstanceID: "i2"}, []Lock{
			instanceLock("b1", "i2", "x1", "x", time.Hour),
		}},
		{"unknown instance", ListFilter{Broker: "b1", InstanceID: "i3"}, nil},
		{"instance of another broker", ListFilter{Broker: "b3", InstanceID: "i1"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, cmpEmpty); d != "" {
				t.Errorf("List(%+v) (-want +got):\n%s", tc.f, d)
			}
		})
	}

	_, err := s.List(ctx, ListFilter{InstanceID: "i1"})
	wantErr(t, "List by InstanceID without Broker", err, ErrInvalid)

	// The binding lock is released on its own; the instance lock stays.
	wantErr(t, "Release of a binding lock", s.Release(ctx, x1.Key, x1.Owner), nil)
	got, err := s.List(ctx, ListFilter{Broker: "b1", InstanceID: "i1"})
	if d := cmp.Diff([]Lock{i1, x2}, got); err != nil || d != "" {
		t.Errorf("List after releasing %s = %v; diff (-want +got):\n%s", x1.Key, err, d)
	}
}
