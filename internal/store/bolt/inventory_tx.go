package bolt

// The inventory's buckets in one transaction (invTx): reading and writing
// the values, their sequence numbers, the counters and the expiry index, as
// each of inventory.go's methods does in its one transaction.

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// Counter keys.
func instanceCountKey(broker, tenant string) []byte {
	return []byte("i\x00" + broker + "\x00" + tenant)
}
func bindingCountKey(broker string) []byte { return []byte("b\x00" + broker) }

// addCount adds delta to the counter k, deleting it at zero.
func addCount(tx *bolt.Tx, k []byte, delta int64) error {
	if delta == 0 {
		return nil
	}
	b := tx.Bucket(bucketCounts)
	var n int64
	if v := b.Get(k); len(v) == 8 {
		n = int64(binary.BigEndian.Uint64(v))
	}
	if n += delta; n <= 0 {
		return b.Delete(k)
	}
	return b.Put(k, binary.BigEndian.AppendUint64(nil, uint64(n)))
}

// invTx is the inventory's buckets in a transaction.
type invTx struct{ values, ids, expiries *bolt.Bucket }

// inventoryTx returns the buckets of tx.
func inventoryTx(tx *bolt.Tx) invTx {
	return invTx{values: tx.Bucket(bucketValues), ids: tx.Bucket(bucketIDs), expiries: tx.Bucket(bucketExpiry)}
}

// writeFills sets how full bbolt fills the pages of inv_values and
// inv_expiry that a write of one record splits (Import sets its own).
func writeFills(tx *bolt.Tx) {
	tx.Bucket(bucketValues).FillPercent = valuesFill
	tx.Bucket(bucketExpiry).FillPercent = expiryFill
}

// seqKey is the inv_values key of sequence number n.
func seqKey(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// idSeq is the inv_values key of the inv_ids value v.
func idSeq(v []byte) ([]byte, bool) {
	n, l := binary.Uvarint(v)
	return seqKey(n), l == len(v) && l > 0
}

// value returns the value of the instance (broker, id), parsed, and its
// inv_values key: ok false if the inventory has neither its record nor a
// binding. Its record is valid during the transaction only.
func (t invTx) value(broker, id string) (v boltValue, seq []byte, ok bool, err error) {
	key := []byte(store.InstanceKey(broker, id))
	idv := t.ids.Get(key)
	if idv == nil {
		return boltValue{}, nil, false, nil
	}
	v, seq, err = t.valueAt(key, id, idv)
	return v, seq, err == nil, err
}

// valueAt reads the value of instance id (of inv_ids key key) under the
// inv_ids value idv.
func (t invTx) valueAt(key []byte, id string, idv []byte) (boltValue, []byte, error) {
	seq, ok := idSeq(idv)
	if !ok {
		return boltValue{}, nil, fmt.Errorf("%w: inventory index entry %q holds %x, not a sequence number",
			store.ErrUnavailable, key, idv)
	}
	p := t.values.Get(seq)
	if p == nil {
		return boltValue{}, nil, fmt.Errorf("%w: inventory record %x of %q is missing", store.ErrUnavailable, seq, key)
	}
	v, err := parseBoltValue(id, p)
	if err != nil {
		return boltValue{}, nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return v, seq, nil
}

// bindingAt reads the value of the binding under sequence number n of
// the instance id: its id and record, valid during the transaction only.
func (t invTx) bindingAt(id string, n uint64) (bid, rec []byte, err error) {
	p := t.values.Get(seqKey(n))
	if p == nil {
		return nil, nil, fmt.Errorf("%w: inventory record %d of a binding of instance %q is missing",
			store.ErrUnavailable, n, id)
	}
	bid, rec, ok := parseBindingValue(p)
	if !ok {
		return nil, nil, fmt.Errorf("%w: inventory record %d of a binding of instance %q: %w",
			store.ErrUnavailable, n, id, store.ErrBadMember)
	}
	return bid, rec, nil
}

// binding finds the binding bid of v, the value of instance id: its index
// in v.bindings (-1 if v has none such) and its record, valid during the
// transaction only. It reads the bindings' values in turn: an instance has
// tens of bindings, not thousands.
func (t invTx) binding(id string, v boltValue, bid string) (int, []byte, error) {
	for i, n := range v.bindings {
		got, rec, err := t.bindingAt(id, n)
		if err != nil {
			return -1, nil, err
		}
		if string(got) == bid {
			return i, rec, nil
		}
	}
	return -1, nil, nil
}

// member returns v, the value of instance id, with its bindings' ids and
// records, valid during the transaction only.
func (t invTx) member(id string, v boltValue) (store.Member, error) {
	m := store.Member{ID: id, Instance: v.instance, Bindings: make([]store.MemberBinding, 0, len(v.bindings))}
	for _, n := range v.bindings {
		bid, rec, err := t.bindingAt(id, n)
		if err != nil {
			return store.Member{}, err
		}
		m.Bindings = append(m.Bindings, store.MemberBinding{ID: string(bid), Rec: rec})
	}
	return m, nil
}

// append stores rec under a new sequence number at the end of inv_values
// and returns the number.
func (t invTx) append(rec []byte) (uint64, error) {
	n, err := t.values.NextSequence()
	if err != nil {
		return 0, err
	}
	return n, t.values.Put(seqKey(n), rec)
}

// put stores v as the value of the instance id of broker, under seq, or
// under a new sequence number if seq is nil; it deletes the value if v
// holds nothing.
func (t invTx) put(broker, id string, v boltValue, seq []byte) error {
	key := []byte(store.InstanceKey(broker, id))
	if len(v.instance) == 0 && len(v.bindings) == 0 {
		if seq == nil {
			return nil
		}
		if err := t.ids.Delete(key); err != nil {
			return err
		}
		return t.values.Delete(seq)
	}
	if seq != nil {
		return t.values.Put(seq, v.encode())
	}
	n, err := t.append(v.encode())
	if err != nil {
		return err
	}
	return t.ids.Put(key, binary.AppendUvarint(nil, n))
}

// putInstanceTx stores rec unless the instance exists and replace is false;
// it reports whether it stored it.
func putInstanceTx(tx *bolt.Tx, in store.Instance, rec []byte, replace bool) (bool, error) {
	t := inventoryTx(tx)
	v, seq, _, err := t.value(in.Broker, in.InstanceID)
	if err != nil {
		return false, err
	}
	if len(v.instance) > 0 {
		if !replace {
			return false, nil
		}
		if err := unindexInstance(tx, in.Broker, v.instance); err != nil {
			return false, err
		}
	}
	v.instance = rec
	if err := t.put(in.Broker, in.InstanceID, v, seq); err != nil {
		return false, err
	}
	return true, addCount(tx, instanceCountKey(in.Broker, in.Tenant), 1)
}

// unindexInstance removes the count of the stored record old.
func unindexInstance(tx *bolt.Tx, broker string, old []byte) error {
	tenant, _ := store.RecordTenant(old)
	return addCount(tx, instanceCountKey(broker, tenant), -1)
}

// expiryKey is the part of a binding's inv_expiry key after the time.
func expiryKey(broker, instanceID, bindingID string) string {
	return store.InstanceKey(broker, store.BindingSubkey(instanceID, bindingID))
}

// putBindingTx is putInstanceTx for a binding: it rewrites the binding's
// value in place, or appends it and adds it to its instance's value; it
// moves the binding's entry in the expiry index too.
func putBindingTx(tx *bolt.Tx, bd store.Binding, rec []byte, replace bool) (bool, error) {
	t := inventoryTx(tx)
	v, seq, _, err := t.value(bd.Broker, bd.InstanceID)
	if err != nil {
		return false, err
	}
	k := expiryKey(bd.Broker, bd.InstanceID, bd.BindingID)
	i, old, err := t.binding(bd.InstanceID, v, bd.BindingID)
	if err != nil {
		return false, err
	}
	if i >= 0 {
		if !replace {
			return false, nil
		}
		if err := t.unindexExpiry(k, old); err != nil {
			return false, err
		}
		if err := t.values.Put(seqKey(v.bindings[i]), bindingValue(bd.BindingID, rec)); err != nil {
			return false, err
		}
	} else {
		n, err := t.append(bindingValue(bd.BindingID, rec))
		if err != nil {
			return false, err
		}
		v.bindings = append(v.bindings, n)
		if err := t.put(bd.Broker, bd.InstanceID, v, seq); err != nil {
			return false, err
		}
	}
	if !bd.ExpiresAt.IsZero() {
		if err := t.expiries.Put(timeKey(bd.ExpiresAt, k), nil); err != nil {
			return false, err
		}
	}
	if i >= 0 {
		return true, nil
	}
	return true, addCount(tx, bindingCountKey(bd.Broker), 1)
}

// valuesFill is how full bbolt fills the pages of inv_values that a
// write splits (its default: 0.5). Values are appended at the end of the
// tree and never move: a binding's value is rewritten in place with about
// its size, and an instance's value grows by a sequence number (3 bytes)
// at each bind, so the pages take that in the room a fill below 1 leaves.
const valuesFill = 0.95

// expiryFill is how full bbolt fills the pages of the expiry index when
// PutBinding splits them (its default: 0.5). A binding's ExpiresAt is
// mostly later than the ones recorded before it (bind time plus the
// broker's lifetime), so the index grows at its end, where half-full pages
// would stay half empty: measured on bindings expiring 90 days after their
// bind (BenchmarkInventoryFootprintBolt), 0.9 takes the index from 240 to
// 128 bytes per binding, branch pages included. (Keys arriving in random
// order fare worse at 0.9 than at 0.5: Import chooses by its batch.)
const expiryFill = 0.9

// unindexExpiry removes the expiry index entry of the binding whose
// inv_expiry key ends in k, stored as the record old (none if it has no
// ExpiresAt).
func (t invTx) unindexExpiry(k string, old []byte) error {
	at, err := store.RecordExpiry(old)
	if err != nil {
		return fmt.Errorf("%w: binding %q: decode record: %w", store.ErrUnavailable, k, err)
	}
	if at.IsZero() {
		return nil
	}
	return t.expiries.Delete(timeKey(at, k))
}
