package memory

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The inventory of the memory backend: per broker, records kept encoded in
// maps, and the keys in order for listing.

// memBroker is one broker's inventory.
type memBroker struct {
	instances map[string][]byte       // instance id -> record
	ids       sortedKeys              // keys of instances
	tenants   map[string]int          // instances per tenant
	bindings  map[string][]memBinding // instance id -> its bindings, by binding id
	bound     sortedKeys              // keys of bindings
	nbindings int
}

// memBinding is one binding of an instance. An instance has a few
// bindings, so a sorted slice serves them: it costs a fraction of a map's
// memory (a map per instance took about 400 bytes).
type memBinding struct {
	id  string
	rec []byte
	// expires is the ExpiresAt in microseconds since 1970, noExpiry for
	// none: ExpiringBindings and CountExpiring read it without decoding
	// the record.
	expires int64
}

// noExpiry is memBinding.expires of a binding without an ExpiresAt (no
// storable time is that early).
const noExpiry = math.MinInt64

// findBinding returns the index of binding id in of, and whether it is
// there (else where it would go).
func findBinding(of []memBinding, id string) (int, bool) {
	return slices.BinarySearchFunc(of, id, func(b memBinding, id string) int { return strings.Compare(b.id, id) })
}

// expiresMicro is memBinding.expires of t.
func expiresMicro(t time.Time) int64 {
	if t.IsZero() {
		return noExpiry
	}
	return t.UnixMicro()
}

// broker returns the inventory of name, created if create is set (else
// nil when there is none).
func (m *memory) broker(name string, create bool) *memBroker {
	b := m.brokers[name]
	if b == nil && create {
		b = &memBroker{instances: map[string][]byte{}, tenants: map[string]int{}, bindings: map[string][]memBinding{}}
		m.brokers[name] = b
	}
	return b
}

// putInstance stores rec unless the instance exists and replace is false;
// it reports whether it stored it.
func (b *memBroker) putInstance(id string, rec []byte, replace bool) bool {
	if old, ok := b.instances[id]; ok {
		if !replace {
			return false
		}
		b.countTenant(old, -1)
	} else {
		b.ids.add(id)
	}
	b.instances[id] = rec
	b.countTenant(rec, +1)
	return true
}

func (b *memBroker) countTenant(rec []byte, delta int) {
	t, _ := store.RecordTenant(rec)
	if b.tenants[t] += delta; b.tenants[t] <= 0 {
		delete(b.tenants, t)
	}
}

// putBinding is putInstance for a binding; expires is its ExpiresAt.
func (b *memBroker) putBinding(instance, id string, expires time.Time, rec []byte, replace bool) bool {
	of, had := b.bindings[instance]
	if !had {
		b.bound.add(instance)
	}
	nb := memBinding{id: id, rec: rec, expires: expiresMicro(expires)}
	i, found := findBinding(of, id)
	switch {
	case found && !replace:
		return false
	case found:
		of[i] = nb
	default:
		of = slices.Insert(of, i, nb)
		b.nbindings++
	}
	b.bindings[instance] = of
	return true
}

// Records are validated and packed before the mutex is taken: packing is
// the expensive part of a put.

func (m *memory) PutInstance(ctx context.Context, in store.Instance) (store.Instance, error) {
	in, _, err := m.PutInstanceCancelling(ctx, in, "")
	return in, err
}

// PutInstanceCancelling puts and deletes under one hold of the mutex. A
// record replaced keeps its Created by encoding the record again under
// the mutex: a provision repeated over a recorded one, rare.
func (m *memory) PutInstanceCancelling(ctx context.Context, in store.Instance, orphanID string) (store.Instance, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Instance{}, false, err
	}
	keep := in.Created.IsZero()
	in, rec, err := store.PrepareInstance(in, m.now())
	if err != nil {
		return store.Instance{}, false, err
	}
	if err := m.begin(ctx); err != nil {
		return store.Instance{}, false, err
	}
	defer m.mu.Unlock()
	b := m.broker(in.Broker, true)
	old := b.instances[in.InstanceID]
	if keep {
		if in, rec, err = store.KeepInstanceCreated(in, rec, old); err != nil {
			return store.Instance{}, false, err
		}
	}
	r, replan, err := store.ReplanUsage(old, in, m.now())
	if err != nil {
		return store.Instance{}, false, err
	}
	b.putInstance(in.InstanceID, rec, true)
	if replan {
		m.addUsage(r)
	}
	_, cancelled := m.orphans[orphanID]
	delete(m.orphans, orphanID)
	return in, cancelled, nil
}

// Reads take records from the maps under the mutex and decode them after
// it: a stored record is never changed in place, only replaced.

// memRecord is an encoded record and its names.
type memRecord struct {
	broker, instance, binding string
	rec                       []byte
}

func (r memRecord) decodeInstance() (store.Instance, error) {
	return store.DecodeInstance(r.broker, r.instance, r.rec)
}

func (r memRecord) decodeBinding() (store.Binding, error) {
	return store.DecodeBinding(r.broker, r.instance, r.binding, r.rec)
}

// decodeAll decodes recs in order.
func decodeAll[T any](recs []memRecord, decode func(memRecord) (T, error)) ([]T, error) {
	var out []T
	for _, r := range recs {
		v, err := decode(r)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (m *memory) GetInstance(ctx context.Context, broker, instanceID string) (store.Instance, error) {
	if err := m.begin(ctx); err != nil {
		return store.Instance{}, err
	}
	var rec []byte
	if b := m.broker(broker, false); b != nil {
		rec = b.instances[instanceID]
	}
	m.mu.Unlock()
	if err := store.CheckInstanceKey(broker, instanceID); err != nil {
		return store.Instance{}, err
	}
	if rec == nil {
		return store.Instance{}, store.NoInstance(broker, instanceID)
	}
	return store.DecodeInstance(broker, instanceID, rec)
}

func (m *memory) DeleteInstance(ctx context.Context, broker, instanceID string) ([]store.Binding, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if err := store.CheckInstanceKey(broker, instanceID); err != nil {
		return nil, err
	}
	b := m.broker(broker, false)
	if b == nil {
		return nil, store.NoInstance(broker, instanceID)
	}
	rec, ok := b.instances[instanceID]
	of := b.bindings[instanceID]
	if !ok && len(of) == 0 {
		return nil, store.NoInstance(broker, instanceID)
	}
	gone, err := decodeAll(bindingRecords(broker, instanceID, of), memRecord.decodeBinding)
	if err != nil { // a record that does not decode: delete nothing
		return nil, err
	}
	used, err := store.DeletedUsage(broker, instanceID, rec, gone, m.now())
	if err != nil {
		return nil, err
	}
	m.addUsage(used...)
	if ok {
		b.countTenant(rec, -1)
		delete(b.instances, instanceID)
		b.ids.remove()
	}
	if of != nil {
		b.nbindings -= len(of)
		delete(b.bindings, instanceID)
		b.bound.remove()
	}
	return gone, nil
}

// bindingRecords returns the bindings of one instance, by binding id.
func bindingRecords(broker, instanceID string, of []memBinding) []memRecord {
	var out []memRecord
	for _, b := range of {
		out = append(out, memRecord{broker, instanceID, b.id, b.rec})
	}
	return out
}

func (m *memory) PutBinding(ctx context.Context, bd store.Binding) (store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return store.Binding{}, err
	}
	keep := bd.Created.IsZero()
	bd, rec, err := store.PrepareBinding(bd, m.now())
	if err != nil {
		return store.Binding{}, err
	}
	if err := m.begin(ctx); err != nil {
		return store.Binding{}, err
	}
	defer m.mu.Unlock()
	b := m.broker(bd.Broker, true)
	if of := b.bindings[bd.InstanceID]; keep {
		if i, ok := findBinding(of, bd.BindingID); ok {
			if bd, rec, err = store.KeepBindingCreated(bd, rec, of[i].rec); err != nil {
				return store.Binding{}, err
			}
		}
	}
	b.putBinding(bd.InstanceID, bd.BindingID, bd.ExpiresAt, rec, true)
	return bd, nil
}

func (m *memory) GetBinding(ctx context.Context, broker, instanceID, bindingID string) (store.Binding, error) {
	if err := m.begin(ctx); err != nil {
		return store.Binding{}, err
	}
	var rec []byte
	if b := m.broker(broker, false); b != nil {
		of := b.bindings[instanceID]
		if i, ok := findBinding(of, bindingID); ok {
			rec = of[i].rec
		}
	}
	m.mu.Unlock()
	if err := store.CheckBindingKey(broker, instanceID, bindingID); err != nil {
		return store.Binding{}, err
	}
	if rec == nil {
		return store.Binding{}, store.NoBinding(broker, instanceID, bindingID)
	}
	return store.DecodeBinding(broker, instanceID, bindingID, rec)
}

func (m *memory) DeleteBinding(ctx context.Context, broker, instanceID, bindingID string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if err := store.CheckBindingKey(broker, instanceID, bindingID); err != nil {
		return err
	}
	b := m.broker(broker, false)
	if b == nil {
		return store.NoBinding(broker, instanceID, bindingID)
	}
	of := b.bindings[instanceID]
	i, ok := findBinding(of, bindingID)
	if !ok {
		return store.NoBinding(broker, instanceID, bindingID)
	}
	gone, err := store.DecodeBinding(broker, instanceID, bindingID, of[i].rec)
	if err != nil {
		return err
	}
	m.addUsage(store.BindingUsage(gone, m.now()))
	b.nbindings--
	if len(of) == 1 {
		delete(b.bindings, instanceID)
		b.bound.remove()
		return nil
	}
	b.bindings[instanceID] = slices.Delete(of, i, i+1)
	return nil
}
