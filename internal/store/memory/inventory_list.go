package memory

import (
	"context"
	"iter"
	"maps"
	"slices"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// Listing, counting, export and import of the memory backend's inventory.

// sortedKeys keeps the keys of a map in order for paging, lazily: new keys
// wait in added until a listing merges them in (one sort of the new keys
// and a linear merge), and deleted keys stay until a merge drops them
// (readers skip keys gone from the map). A write costs O(1); the first
// listing after writes O(n + k log k) for k new keys.
type sortedKeys struct {
	sorted []string
	added  []string
	stale  int
}

func (s *sortedKeys) add(k string) { s.added = append(s.added, k) }

func (s *sortedKeys) remove() { s.stale++ }

// keys returns every key in order, and maybe keys no longer in the map:
// exists tells which are.
func (s *sortedKeys) keys(exists func(string) bool) []string {
	if len(s.added) == 0 && s.stale <= len(s.sorted)/4 {
		return s.sorted
	}
	slices.Sort(s.added)
	merged := make([]string, 0, len(s.sorted)+len(s.added))
	a, b := s.sorted, s.added
	for len(a) > 0 || len(b) > 0 {
		var k string
		if len(b) == 0 || len(a) > 0 && a[0] <= b[0] {
			k, a = a[0], a[1:]
		} else {
			k, b = b[0], b[1:]
		}
		if (len(merged) == 0 || merged[len(merged)-1] != k) && exists(k) {
			merged = append(merged, k)
		}
	}
	s.sorted, s.added, s.stale = slices.Clip(merged), nil, 0
	return s.sorted
}

// after returns the keys after k (all keys if k is empty).
func after(keys []string, k string) []string {
	i, found := slices.BinarySearch(keys, k)
	if found {
		i++
	}
	return keys[i:]
}

func (b *memBroker) instanceIDs() []string {
	return b.ids.keys(func(k string) bool { _, ok := b.instances[k]; return ok })
}

func (b *memBroker) boundIDs() []string {
	return b.bound.keys(func(k string) bool { _, ok := b.bindings[k]; return ok })
}

// brokerNames returns the names of the brokers with an inventory that f
// selects, from the cursor's broker on, in order.
func (m *memory) brokerNames(f store.InstanceFilter, from string) []string {
	if f.Broker != "" {
		if f.Broker < from {
			return nil
		}
		return []string{f.Broker}
	}
	names := slices.Sorted(maps.Keys(m.brokers))
	i, _ := slices.BinarySearch(names, from)
	return names[i:]
}

func (m *memory) ListInstances(ctx context.Context, f store.InstanceFilter, cursor string, limit int) ([]store.Instance, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	cb, ci, limit, err := store.ListArgs(f, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	recs, err := m.instanceRecords(ctx, f, cb, ci, limit+1)
	if err != nil {
		return nil, "", err
	}
	found, err := decodeAll(recs, memRecord.decodeInstance)
	if err != nil {
		return nil, "", err
	}
	page, next := store.PageOf(found, limit, store.InstanceName)
	return page, next, nil
}

// instanceRecords returns up to n records of instances f selects after
// (cb, ci), in order.
func (m *memory) instanceRecords(ctx context.Context, f store.InstanceFilter, cb, ci string, n int) ([]memRecord, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var found []memRecord
	for _, name := range m.brokerNames(f, cb) {
		b := m.broker(name, false)
		if b == nil {
			continue
		}
		ids := b.instanceIDs()
		if name == cb {
			ids = after(ids, ci)
		}
		for _, id := range ids {
			rec, ok := b.instances[id]
			if !ok || f.Tenant != "" && !store.SameTenant(rec, f.Tenant) {
				continue
			}
			if found = append(found, memRecord{name, id, "", rec}); len(found) == n {
				return found, nil
			}
		}
	}
	return found, nil
}

func (m *memory) CountInstances(ctx context.Context, f store.InstanceFilter) (int, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	if err := store.CheckFilter(f); err != nil {
		return 0, err
	}
	n := 0
	for _, name := range m.brokerNames(f, "") {
		if b := m.broker(name, false); b != nil && f.Tenant != "" {
			n += b.tenants[f.Tenant]
		} else if b != nil {
			n += len(b.instances)
		}
	}
	return n, nil
}

func (m *memory) ListBindings(ctx context.Context, broker, instanceID string) ([]store.Binding, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	var recs []memRecord
	if b := m.broker(broker, false); b != nil {
		recs = bindingRecords(broker, instanceID, b.bindings[instanceID])
	}
	m.mu.Unlock()
	if err := store.CheckInstanceKey(broker, instanceID); err != nil {
		return nil, err
	}
	return decodeAll(recs, memRecord.decodeBinding)
}

func (m *memory) CountBindings(ctx context.Context, broker string) (int, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	if err := store.CheckName("broker", broker, false); err != nil {
		return 0, err
	}
	n := 0
	for _, name := range m.brokerNames(store.InstanceFilter{Broker: broker}, "") {
		if b := m.broker(name, false); b != nil {
			n += b.nbindings
		}
	}
	return n, nil
}

// bindingsAfter walks the brokers from pos's, their instances with
// bindings from pos's, and each instance's bindings in order.
func (m *memory) bindingsAfter(ctx context.Context, pos store.BindingPos, limit int) ([]store.Binding, store.BindingPos, bool, error) {
	recs, next, done, err := m.bindingRecordsAfter(ctx, pos, limit)
	if err != nil {
		return nil, pos, false, err
	}
	out, err := decodeAll(recs, memRecord.decodeBinding)
	return out, next, done, err
}

func (m *memory) bindingRecordsAfter(ctx context.Context, pos store.BindingPos, limit int) ([]memRecord, store.BindingPos, bool, error) {
	if err := m.begin(ctx); err != nil {
		return nil, pos, false, err
	}
	defer m.mu.Unlock()
	var out []memRecord
	for _, name := range m.brokerNames(store.InstanceFilter{}, pos.Broker) {
		b := m.broker(name, false)
		ids := b.boundIDs()
		if name == pos.Broker {
			i, _ := slices.BinarySearch(ids, pos.Instance)
			ids = ids[i:]
		}
		for _, id := range ids {
			for _, bd := range b.bindings[id] {
				if store.ComparePos(store.BindingPos{Broker: name, Instance: id, Binding: bd.id}, pos) <= 0 {
					continue
				}
				if out = append(out, memRecord{name, id, bd.id, bd.rec}); len(out) == limit {
					return out, store.BindingPos{Broker: name, Instance: id, Binding: bd.id}, false, nil
				}
			}
		}
	}
	return out, pos, true, nil
}

func (m *memory) Export(ctx context.Context) iter.Seq2[store.Entry, error] {
	return store.Export(ctx, m.ListInstances, m.bindingsAfter)
}

func (m *memory) Import(ctx context.Context, entries []store.Entry, replace bool) (store.ImportResult, error) {
	if err := ctx.Err(); err != nil {
		return store.ImportResult{}, err
	}
	prepared, err := store.PrepareEntries(entries, m.now())
	if err != nil {
		return store.ImportResult{}, err
	}
	if err := m.begin(ctx); err != nil {
		return store.ImportResult{}, err
	}
	defer m.mu.Unlock()
	var res store.ImportResult
	for _, e := range prepared {
		var written bool
		if in := e.Instance; in != nil {
			written = m.broker(in.Broker, true).putInstance(in.InstanceID, e.Rec, replace)
		} else {
			bd := e.Binding
			written = m.broker(bd.Broker, true).putBinding(bd.InstanceID, bd.BindingID, bd.ExpiresAt, e.Rec, replace)
		}
		if written {
			res.Written++
		} else {
			res.Skipped++
		}
	}
	return res, nil
}
