package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The contract of binding locks and of List by instance.

// InstanceLock is a lock on instance id of broker for tenant, or on its
// binding if binding is set.
func InstanceLock(broker, id, binding, tenant string, ttl time.Duration) store.Lock {
	l := Lock(id, "owner-"+broker+"-"+id+"-"+binding, ttl)
	l.Key, l.Broker, l.Tenant = store.LockKey(broker, id), broker, tenant
	if binding != "" {
		l.Key, l.Kind, l.BindingID = store.BindingLockKey(broker, id, binding), store.KindBind, binding
	}
	return l
}

func testListInstance(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	acquire := func(l store.Lock) store.Lock { t.Helper(); return MustAcquire(t, s, l) }
	i1 := acquire(InstanceLock("b1", "i1", "", "x", time.Hour))
	// Binding locks sit beside the instance lock: all are held at once.
	x1 := acquire(InstanceLock("b1", "i1", "x1", "x", time.Hour))
	x2 := acquire(InstanceLock("b1", "i1", "x2", "y", time.Hour))
	acquire(InstanceLock("b1", "i1", "x3", "x", time.Minute)) // expires below
	acquire(InstanceLock("b1", "i10", "", "x", time.Hour))    // an id extending i1
	acquire(InstanceLock("b1", "i10", "x1", "x", time.Hour))
	acquire(InstanceLock("b1", "i1-a", "", "x", time.Hour)) // sorts between b1/i1 and b1/i1/
	acquire(InstanceLock("b2", "i1", "", "x", time.Hour))
	acquire(InstanceLock("b1", "i2", "x1", "x", time.Hour))
	// Broker "b1/i1", instance "z": key b1/i1/z, under b1/i1's prefix, but
	// not a lock of broker b1.
	slash := acquire(InstanceLock("b1/i1", "z", "", "x", time.Hour))
	// Glob metacharacters in ids, and a lock their unescaped pattern
	// would match.
	glob := acquire(InstanceLock("g[1]*", `i?\`, "", "x", time.Hour))
	globX := acquire(InstanceLock("g[1]*", `i?\`, "x*", "x", time.Hour))
	acquire(InstanceLock("g1x", `iZ`, "", "x", time.Hour))
	c.Advance(time.Minute)

	tests := []struct {
		name string
		f    store.ListFilter
		want []store.Lock
	}{
		{"instance and its bindings", store.ListFilter{Broker: "b1", InstanceID: "i1"}, []store.Lock{i1, x1, x2}},
		{"and tenant", store.ListFilter{Broker: "b1", InstanceID: "i1", Tenant: "y"}, []store.Lock{x2}},
		{"broker with a slash", store.ListFilter{Broker: "b1/i1", InstanceID: "z"}, []store.Lock{slash}},
		{"glob characters", store.ListFilter{Broker: "g[1]*", InstanceID: `i?\`}, []store.Lock{glob, globX}},
		{"only bindings", store.ListFilter{Broker: "b1", InstanceID: "i2"}, []store.Lock{
			InstanceLock("b1", "i2", "x1", "x", time.Hour),
		}},
		{"unknown instance", store.ListFilter{Broker: "b1", InstanceID: "i3"}, nil},
		{"instance of another broker", store.ListFilter{Broker: "b3", InstanceID: "i1"}, nil},
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

	_, err := s.List(ctx, store.ListFilter{InstanceID: "i1"})
	WantErr(t, "List by InstanceID without Broker", err, store.ErrInvalid)

	// The binding lock is released on its own; the instance lock stays.
	WantErr(t, "Release of a binding lock", s.Release(ctx, x1.Key, x1.Owner), nil)
	got, err := s.List(ctx, store.ListFilter{Broker: "b1", InstanceID: "i1"})
	if d := cmp.Diff([]store.Lock{i1, x2}, got); err != nil || d != "" {
		t.Errorf("List after releasing %s = %v; diff (-want +got):\n%s", x1.Key, err, d)
	}
}
