package memory

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The expiry index of the memory backend: each binding's ExpiresAt kept
// beside its record (see internal/store's inventory_expiry.go).

// memExpiring is one entry of the memory backend's index.
type memExpiring struct {
	at  int64 // ExpiresAt, microseconds since 1970
	rec memRecord
}

func (m *memory) ExpiringBindings(ctx context.Context, broker string, before time.Time, limit int) ([]store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit, err := store.ExpiringArgs(broker, limit)
	if err != nil {
		return nil, err
	}
	found, err := m.expiringRecords(ctx, broker, before.UnixMicro())
	if err != nil {
		return nil, err
	}
	slices.SortFunc(found, func(a, b memExpiring) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.rec.broker, b.rec.broker),
			cmp.Compare(a.rec.instance, b.rec.instance), cmp.Compare(a.rec.binding, b.rec.binding))
	})
	recs := make([]memRecord, 0, min(limit, len(found)))
	for _, e := range found[:min(limit, len(found))] {
		recs = append(recs, e.rec)
	}
	return decodeAll(recs, memRecord.decodeBinding)
}

// expiringRecords returns the records of the bindings of broker ("": all)
// whose ExpiresAt is before the microsecond before, unordered.
func (m *memory) expiringRecords(ctx context.Context, broker string, before int64) ([]memExpiring, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var found []memExpiring
	for _, name := range m.brokerNames(store.InstanceFilter{Broker: broker}, "") {
		b := m.broker(name, false)
		if b == nil {
			continue
		}
		for id, of := range b.bindings {
			for _, bd := range of {
				if bd.expires != noExpiry && bd.expires < before {
					found = append(found, memExpiring{bd.expires, memRecord{name, id, bd.id, bd.rec}})
				}
			}
		}
	}
	return found, nil
}

func (m *memory) CountExpiring(ctx context.Context, before time.Time) (map[string]int, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	t := before.UnixMicro()
	counts := map[string]int{}
	for name, b := range m.brokers {
		for _, of := range b.bindings {
			for _, bd := range of {
				if bd.expires != noExpiry && bd.expires < t {
					counts[name]++
				}
			}
		}
	}
	return counts, nil
}
