package proxy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/routes"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// TestMigrationOwner: which broker of a migrating route a call goes to.
// The inventory decides (the new broker first: an instance imported under
// it has moved), then a lock in flight (an operation whose success is not
// recorded yet), then the orphan queue, then the call: a provision goes to the new broker,
// anything else to the old one. An inventory that cannot be read is a
// 503 naming both brokers, never a guess.
func TestMigrationOwner(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st, err := backend.Open(store.Config{Backend: store.BackendMemory}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	inv := &unreadableInventory{Store: st}
	old, nw := newRoute("", nil, &upstream.Upstream{Name: "old"}), newRoute("", nil, &upstream.Upstream{Name: "new"})
	m := &routes.Migration{Old: old, New: nw, Inv: inv, Locks: inv}
	put := func(broker, id string) {
		if _, err := st.PutInstance(ctx, store.Instance{Broker: broker, InstanceID: id}); err != nil {
			t.Fatal(err)
		}
	}
	lock := func(broker, id, binding string) {
		key := store.LockKey(broker, id)
		if binding != "" {
			key = store.BindingLockKey(broker, id, binding)
		}
		if _, err := st.Acquire(ctx, store.Lock{Key: key, Owner: "o", Kind: store.KindProvision, Broker: broker, InstanceID: id,
			BindingID: binding, Started: now, Deadline: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	put("old", "on-old")
	put("new", "on-new")
	put("old", "on-both")
	put("new", "on-both")
	lock("new", "locked-new", "")
	lock("old", "locked-old", "")
	if err := st.PutOrphan(ctx, store.Orphan{ID: guard.OrphanID(store.KindDeprovision, "new", "orphan-new", ""), Broker: "new",
		InstanceID: "orphan-new", Kind: store.KindDeprovision, Created: now, NextAttempt: now}); err != nil {
		t.Fatal(err)
	}
	put("old", "recorded-old-locked-new")
	lock("new", "recorded-old-locked-new", "")

	tests := []struct {
		id   string
		ep   rules.Endpoint
		want *route
	}{
		{"unknown", rules.Provision, nw},
		{"unknown", rules.Deprovision, old},
		{"unknown", rules.GetInstance, old},
		{"unknown", rules.InstanceLastOperation, old},
		{"on-old", rules.Provision, old}, // a repeat of a provision the old broker made
		{"on-old", rules.Bind, old},
		{"on-new", rules.Deprovision, nw},
		{"on-new", rules.Unbind, nw},
		{"on-both", rules.Update, nw},
		{"locked-new", rules.Deprovision, nw},          // the orphan mitigation of a provision in flight
		{"locked-old", rules.Provision, old},           // a repeat of a provision in flight before the switch
		{"orphan-new", rules.Deprovision, nw},          // the platform's orphan mitigation of a provision that failed there
		{"recorded-old-locked-new", rules.Update, old}, // the inventory first
	}
	for _, tc := range tests {
		got, err := m.Owner(ctx, rules.Call{Endpoint: tc.ep, InstanceID: tc.id})
		if err != nil || got != tc.want {
			name := "none"
			if got != nil {
				name = upstream.Of(got).Name
			}
			t.Errorf("%s of %q: %s %v, want %s", tc.ep, tc.id, name, err, upstream.Of(tc.want).Name)
		}
	}

	inv.broken.Store(true)
	_, err = m.Owner(ctx, rules.Call{Endpoint: rules.Provision, InstanceID: "on-old"})
	var oe *osb.Error
	if !errors.As(err, &oe) || oe.Status != http.StatusServiceUnavailable || !strings.Contains(oe.Description, `broker "old" or "new"`) ||
		strings.Contains(oe.Description, "injected") {
		t.Errorf("with the inventory unreadable: %#v, want 503 naming both brokers and not the store's error", err)
	}
}
