package store

import (
	"cmp"
	"context"
	"slices"
	"time"
)

// The index of bindings by ExpiresAt (ExpiringBindings, CountExpiring):
// what every backend shares, and the memory backend's. Bolt and Redis keep
// an index in the same atomic step as the binding records: a put adds or
// moves the binding's entry (or drops it when the new record has no
// ExpiresAt), a delete removes it; bindings without an ExpiresAt cost it
// nothing. The memory backend keeps each binding's ExpiresAt beside its
// record and walks them all (a comparison each: a few milliseconds for a
// million bindings, under its mutex).

// expiringArgs validates the arguments of ExpiringBindings and returns the
// page size.
func expiringArgs(broker string, limit int) (int, error) {
	if err := checkName("broker", broker, false); err != nil {
		return 0, err
	}
	return listLimit(limit), nil
}

// byExpiry orders bindings as ExpiringBindings returns them.
func byExpiry(a, b Binding) int {
	return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), cmp.Compare(a.Broker, b.Broker),
		cmp.Compare(a.InstanceID, b.InstanceID), cmp.Compare(a.BindingID, b.BindingID))
}

// recordExpiry reads the ExpiresAt of an encoded binding record (zero when
// it has none).
func recordExpiry(rec []byte) (time.Time, error) {
	var t time.Time
	_, err := fields(rec, func(tag byte, p []byte) error {
		var err error
		if tag == tagExpiresAt {
			t, err = decodeTime(p)
		}
		return err
	})
	return t, err
}

// memExpiring is one entry of the memory backend's index.
type memExpiring struct {
	at  int64 // ExpiresAt, microseconds since 1970
	rec memRecord
}

func (m *memory) ExpiringBindings(ctx context.Context, broker string, before time.Time, limit int) ([]Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit, err := expiringArgs(broker, limit)
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
	for _, name := range m.brokerNames(InstanceFilter{Broker: broker}, "") {
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
