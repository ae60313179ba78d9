package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The inventory of the bolt backend (layout in bolt.go). Each write is one
// transaction that changes a value, its expiry index entries and its
// counters together; listings seek to their prefix and read a page.
//
// Each record is a value of inv_values (inventory_value.go), under a
// sequence number taken when the inventory first sees it: an instance's
// value holds its record and its bindings' numbers, a binding's its id and
// record; inv_ids maps an instance's key to its value's number. bbolt
// splits a page it writes at half its size, so a tree filled in random key
// order, as instance ids (GUIDs) come, ends about two thirds full; the
// values, keyed by an increasing number, are appended at the end of their
// tree and fill its pages (valuesFill), which leaves random order to
// inv_ids, whose entries are small. A put rewrites a value in place, under
// its number: moving it to a new number would leave a hole where it was.
// A bind appends the binding's value and grows its instance's value by a
// number, 3 bytes, wherever that value is. With an instance's bindings'
// records inside its value (the layout before), a bind grew a value by a
// record, about 270 bytes, in a page already full, and split it: most of
// all when bindings come long after their instances, as apps bind on a
// platform. Finding a binding reads its instance's bindings' values in
// turn (an instance has tens of bindings, not thousands).
//
// Measured with BenchmarkInventoryFootprintBolt (100,000 instances with an
// expiring binding each, bytes of pages per instance; the file grows in
// steps of 16 MB, 168 bytes per instance here, so its size per instance
// is coarser): a file grown by puts, each binding right after its
// instance, took 933 (inv_values 702, 91% full; inv_ids 101; inv_expiry
// 128; file 1,009), with the bindings put after all the instances
// (-inventory.later) 927 to 942 (inv_values 698 to 713, 90 to 91% full;
// file 1,008). The layout before took 997 and 1,163 (file 1,010 and
// 1,176; inv_records 766 and 934, 81% and 66% full); with three bindings
// each 1,805 and 1,828 of pages (inv_values 1,318 and 1,342; file 1,849
// and 1,848), before 2,111 and 2,131 (file 2,184 and 2,183); without
// bindings 514 (inv_values 410, 87% full; file 672), before 493
// (inv_records 388, 92% full; file 504). Listing the bindings' ids with
// their numbers in the instance's value (about 40 bytes a bind, at a fill
// of 0.9) took as much with a binding each but split pages with three
// bound after their instances: 1,661 bytes of inv_values (73% full). By
// import in random order 937 (inv_values 687, inv_ids 101, inv_expiry
// 128, free pages 21; file 1,017), by import of an export 995 (716, 69,
// 163: the bindings come in order of their instances, the expiry index in
// random order; free pages 46; file 1,023), compacted 870 (687, 69, 114;
// file 953). A page holds about ten values of instances or bindings;
// bbolt leaves at least two values of a page a commit overfills on the
// next page (node.splitIndex), so pages filled one value per commit, not
// many as here, hold two fewer than fit: hence 16 kB pages (boltPageSize;
// the figures above are of 4 kB ones). On 1,000,000 (-inventory.n
// 1000000) by puts, 4 kB pages: 942 (inv_values 700, 91% full; inv_ids
// 101; inv_expiry 128), with the bindings put after their instances 941
// (inv_values 707, 90% full); 16 kB pages: 910 (674, 94%; 101; 124) and
// 909 (671, 95%), and 100,000 put from one writer 899 of pages (679,
// 94%; on 4 kB, 20,000 from one writer: 824 of inv_values, 78%
// full); the layout before took 992
// and 1,176 (inv_records 946, 66% full), 1,228 with the records keyed by
// their ids. By import 934, by import of an export 953 (inv_values 708,
// inv_ids 69, inv_expiry 165), compacted 878; without bindings 488
// (inv_values 384, 92% full), with sealed parameters too
// (-inventory.secrets) 707.
// There is no index by tenant: counts by tenant are counters, and a
// listing by tenant reads the values in key order from its cursor on,
// keeping those whose instance record's head names the tenant (no record
// is inflated for that). An index (inv_tenants: tenant NUL broker NUL
// instance id) cost 114 bytes of pages per instance in a file grown by
// puts, 8% of the inventory (BenchmarkInventoryFootprintBolt); a listing
// by tenant, which only the admin API asks for, now reads about 1/s times
// the records of its page for a tenant holding a share s of the instances
// (all of them after the cursor, for a tenant with none), in a read
// transaction that blocks no write.

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

func (s *boltStore) PutInstance(ctx context.Context, in store.Instance) (store.Instance, error) {
	if err := ctx.Err(); err != nil {
		return store.Instance{}, err
	}
	in, rec, err := store.PrepareInstance(in, s.now())
	if err != nil {
		return store.Instance{}, err
	}
	err = s.write(ctx, func(tx *bolt.Tx) error {
		writeFills(tx)
		if err := replanTx(tx, in, s.now()); err != nil {
			return err
		}
		_, err := putInstanceTx(tx, in, rec, true)
		return err
	})
	if err != nil {
		return store.Instance{}, err
	}
	return in, nil
}

func (s *boltStore) GetInstance(ctx context.Context, broker, instanceID string) (store.Instance, error) {
	if err := ctx.Err(); err != nil {
		return store.Instance{}, err
	}
	if err := store.CheckInstanceKey(broker, instanceID); err != nil {
		return store.Instance{}, err
	}
	var in store.Instance
	var found bool
	err := s.read(ctx, func(tx *bolt.Tx) error {
		v, _, _, err := inventoryTx(tx).value(broker, instanceID)
		if found = len(v.instance) > 0; err != nil || !found {
			return err
		}
		in, err = store.DecodeInstance(broker, instanceID, v.instance)
		return err
	})
	switch {
	case err != nil:
		return store.Instance{}, err
	case !found:
		return store.Instance{}, store.NoInstance(broker, instanceID)
	}
	return in, nil
}

func (s *boltStore) DeleteInstance(ctx context.Context, broker, instanceID string) ([]store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckInstanceKey(broker, instanceID); err != nil {
		return nil, err
	}
	var gone []store.Binding
	var found bool
	err := s.write(ctx, func(tx *bolt.Tx) error {
		gone = nil
		writeFills(tx)
		t := inventoryTx(tx)
		v, seq, ok, err := t.value(broker, instanceID)
		if found = ok; err != nil || !found {
			return err
		}
		m, err := t.member(instanceID, v)
		if err != nil {
			return err
		}
		if gone, err = m.SortedBindings(broker); err != nil {
			return err
		}
		used, err := store.DeletedUsage(broker, instanceID, v.instance, gone, s.now())
		if err != nil {
			return err
		}
		if err := putUsageTx(tx, used...); err != nil {
			return err
		}
		for _, n := range v.bindings {
			if err := t.values.Delete(seqKey(n)); err != nil {
				return err
			}
		}
		for _, bd := range gone {
			if !bd.ExpiresAt.IsZero() {
				if err := t.expiries.Delete(timeKey(bd.ExpiresAt, expiryKey(broker, instanceID, bd.BindingID))); err != nil {
					return err
				}
			}
		}
		if err := addCount(tx, bindingCountKey(broker), -int64(len(gone))); err != nil {
			return err
		}
		if len(v.instance) > 0 {
			if err := unindexInstance(tx, broker, v.instance); err != nil {
				return err
			}
		}
		return t.put(broker, instanceID, boltValue{}, seq)
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, store.NoInstance(broker, instanceID)
	}
	if len(gone) == 0 {
		gone = nil
	}
	return gone, nil
}

func (s *boltStore) PutBinding(ctx context.Context, bd store.Binding) (store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return store.Binding{}, err
	}
	bd, rec, err := store.PrepareBinding(bd, s.now())
	if err != nil {
		return store.Binding{}, err
	}
	err = s.write(ctx, func(tx *bolt.Tx) error {
		writeFills(tx)
		_, err := putBindingTx(tx, bd, rec, true)
		return err
	})
	if err != nil {
		return store.Binding{}, err
	}
	return bd, nil
}

func (s *boltStore) GetBinding(ctx context.Context, broker, instanceID, bindingID string) (store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return store.Binding{}, err
	}
	if err := store.CheckBindingKey(broker, instanceID, bindingID); err != nil {
		return store.Binding{}, err
	}
	var bd store.Binding
	var found bool
	err := s.read(ctx, func(tx *bolt.Tx) error {
		t := inventoryTx(tx)
		v, _, _, err := t.value(broker, instanceID)
		if err != nil {
			return err
		}
		i, rec, err := t.binding(instanceID, v, bindingID)
		if found = i >= 0; err != nil || !found {
			return err
		}
		bd, err = store.DecodeBinding(broker, instanceID, bindingID, rec)
		return err
	})
	switch {
	case err != nil:
		return store.Binding{}, err
	case !found:
		return store.Binding{}, store.NoBinding(broker, instanceID, bindingID)
	}
	return bd, nil
}

func (s *boltStore) DeleteBinding(ctx context.Context, broker, instanceID, bindingID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckBindingKey(broker, instanceID, bindingID); err != nil {
		return err
	}
	var found bool
	err := s.write(ctx, func(tx *bolt.Tx) error {
		writeFills(tx)
		t := inventoryTx(tx)
		v, seq, _, err := t.value(broker, instanceID)
		if err != nil {
			return err
		}
		i, old, err := t.binding(instanceID, v, bindingID)
		if found = i >= 0; err != nil || !found {
			return err
		}
		if err := t.unindexExpiry(expiryKey(broker, instanceID, bindingID), old); err != nil {
			return err
		}
		bd, err := store.DecodeBinding(broker, instanceID, bindingID, old)
		if err != nil {
			return err
		}
		if err := putUsageTx(tx, store.BindingUsage(bd, s.now())); err != nil {
			return err
		}
		if err := t.values.Delete(seqKey(v.bindings[i])); err != nil {
			return err
		}
		v.bindings = slices.Delete(v.bindings, i, i+1)
		if err := t.put(broker, instanceID, v, seq); err != nil {
			return err
		}
		return addCount(tx, bindingCountKey(broker), -1)
	})
	switch {
	case err != nil:
		return err
	case !found:
		return store.NoBinding(broker, instanceID, bindingID)
	}
	return nil
}
