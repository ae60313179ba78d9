package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// The inventory of the bolt backend (layout in bolt.go). Each write is one
// transaction that changes a value, its expiry index entries and its
// counters together; listings seek to their prefix and read a page.
//
// An instance's record and its bindings' are one value (inventory_member.go)
// in inv_records, under a sequence number taken when the inventory first
// sees the instance, and inv_ids maps the instance's key to it. bbolt
// splits a page it writes at half its size, so a tree filled in random key
// order, as instance ids (GUIDs) come, ends about two thirds full; the
// values, keyed by an increasing number, are appended at the end of their
// tree, which leaves random order to inv_ids, whose entries are small. A
// put rewrites the value in place, under its number: moving it to a new
// number would leave a hole where it was (measured: no smaller). One value
// per instance spends one element (16 bytes of header) and one copy of
// the instance id per instance instead of one per binding.
//
// Measured with BenchmarkInventoryFootprintBolt (100,000 instances with an
// expiring binding each, bytes of pages per instance): a file grown by
// puts took 1,346 with the records keyed by their ids (inv_instances 589,
// inv_bindings 502, inv_expiry 128, the rest free pages), 1,008 in this
// layout with inv_records split at 0.6 (inv_records 728, inv_ids 100, inv_expiry 128, free pages 3, the
// rest the file's last 16 MB growth step); by import in random order
// 1,019 (688, 100, 128), by import of an export 1,036 (690, 69, 165: the
// bindings come in order of their instances, the expiry index in random
// order), compacted 959 (687, 69, 114). The values' pages are at most
// about 90% full: a value of an instance with its binding is about 610
// bytes, six to a 4 KB page (16 KB pages measured worse: 1,346 by puts).
// On 1,000,000 (-inventory.n 1000000), with the fill of recordsFill: 992
// by puts (inv_records 758, 82% full; inv_ids 101; inv_expiry 128), 935
// by import, 936 by import of an export, 886 compacted; 1,228 by puts
// with the records keyed by their ids.
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
type invTx struct{ records, ids, expiries *bolt.Bucket }

// inventoryTx returns the buckets of tx.
func inventoryTx(tx *bolt.Tx) invTx {
	return invTx{records: tx.Bucket(bucketRecords), ids: tx.Bucket(bucketIDs), expiries: tx.Bucket(bucketExpiry)}
}

// writeFills sets how full bbolt fills the pages of inv_records and
// inv_expiry that a write of one record of broker splits (Import sets
// its own).
func writeFills(tx *bolt.Tx, broker string) {
	tx.Bucket(bucketRecords).FillPercent = recordsFill(tx, broker)
	tx.Bucket(bucketExpiry).FillPercent = expiryFill
}

// seqKey is the inv_records key of the inv_ids value v.
func seqKey(v []byte) ([]byte, bool) {
	n, l := binary.Uvarint(v)
	return binary.BigEndian.AppendUint64(nil, n), l == len(v) && l > 0
}

// member returns the value of the instance (broker, id), parsed, and its
// inv_records key: ok false if the inventory has neither its record nor a
// binding. Its records are valid during the transaction only.
func (t invTx) member(broker, id string) (m member, seq []byte, ok bool, err error) {
	key := []byte(instanceKey(broker, id))
	v := t.ids.Get(key)
	if v == nil {
		return member{id: id}, nil, false, nil
	}
	m, seq, err = t.memberAt(key, id, v)
	return m, seq, err == nil, err
}

// memberAt reads the value of instance id (of inv_ids key key) under the
// inv_ids value v.
func (t invTx) memberAt(key []byte, id string, v []byte) (member, []byte, error) {
	seq, ok := seqKey(v)
	if !ok {
		return member{}, nil, fmt.Errorf("%w: inventory index entry %q holds %x, not a sequence number",
			ErrUnavailable, key, v)
	}
	p := t.records.Get(seq)
	if p == nil {
		return member{}, nil, fmt.Errorf("%w: inventory record %x of %q is missing", ErrUnavailable, seq, key)
	}
	m, err := parsePayload(id, p)
	if err != nil {
		return member{}, nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return m, seq, nil
}

// put stores m as the value of the instance of broker, under seq, or
// under a new sequence number at the end of inv_records if seq is nil; it
// deletes the value if m holds nothing.
func (t invTx) put(broker string, m member, seq []byte) error {
	key := []byte(instanceKey(broker, m.id))
	if len(m.instance) == 0 && len(m.bindings) == 0 {
		if seq == nil {
			return nil
		}
		if err := t.ids.Delete(key); err != nil {
			return err
		}
		return t.records.Delete(seq)
	}
	if seq == nil {
		n, err := t.records.NextSequence()
		if err != nil {
			return err
		}
		seq = binary.BigEndian.AppendUint64(nil, n)
		if err := t.ids.Put(key, binary.AppendUvarint(nil, n)); err != nil {
			return err
		}
	}
	return t.records.Put(seq, m.payload())
}

// putInstanceTx stores rec unless the instance exists and replace is false;
// it reports whether it stored it.
func putInstanceTx(tx *bolt.Tx, in Instance, rec []byte, replace bool) (bool, error) {
	t := inventoryTx(tx)
	m, seq, _, err := t.member(in.Broker, in.InstanceID)
	if err != nil {
		return false, err
	}
	if len(m.instance) > 0 {
		if !replace {
			return false, nil
		}
		if err := unindexInstance(tx, in.Broker, m.instance); err != nil {
			return false, err
		}
	}
	m.instance = rec
	if err := t.put(in.Broker, m, seq); err != nil {
		return false, err
	}
	return true, addCount(tx, instanceCountKey(in.Broker, in.Tenant), 1)
}

// unindexInstance removes the count of the stored record old.
func unindexInstance(tx *bolt.Tx, broker string, old []byte) error {
	tenant, _ := recordTenant(old)
	return addCount(tx, instanceCountKey(broker, tenant), -1)
}

// expiryKey is the part of a binding's inv_expiry key after the time.
func expiryKey(broker, instanceID, bindingID string) string {
	return instanceKey(broker, bindingSubkey(instanceID, bindingID))
}

// putBindingTx is putInstanceTx for a binding; it moves the binding's
// entry in the expiry index too.
func putBindingTx(tx *bolt.Tx, bd Binding, rec []byte, replace bool) (bool, error) {
	t := inventoryTx(tx)
	m, seq, _, err := t.member(bd.Broker, bd.InstanceID)
	if err != nil {
		return false, err
	}
	k := expiryKey(bd.Broker, bd.InstanceID, bd.BindingID)
	i := m.binding(bd.BindingID)
	if i >= 0 {
		if !replace {
			return false, nil
		}
		if err := t.unindexExpiry(k, m.bindings[i].rec); err != nil {
			return false, err
		}
		m.bindings[i].rec = rec
	} else {
		m.bindings = append(m.bindings, memberBinding{bd.BindingID, rec})
	}
	if err := t.put(bd.Broker, m, seq); err != nil {
		return false, err
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

// recordsFill is how full bbolt fills the pages of inv_records that a
// write of one record of broker splits. Values are appended, but then
// grow: an instance is recorded at its provision, its bindings later, each
// growing its value by about 270 bytes, some 0.7 of an instance's. Pages
// split full leave no room for that, and a full page whose values grow
// splits into a full page and a remainder; pages split at 1/(1+0.7) take
// their instances' first bindings. Measured by puts of 100,000 instances
// with a binding each (BenchmarkInventoryFootprintBolt), bytes of
// inv_records per instance and how full its pages were, by the fill:
//
//	1.0: 933 (66%)  0.65: 1,157 (54%)  0.6: 728 (85%)  0.55: 733 (85%)
//
// (with sealed credentials, -inventory.secrets, whose bindings grow their
// values more, the file took 1,345, 1,513 and 1,682 bytes at 0.6, 0.55
// and 0.5). But values that never grow would stay in pages about half
// full at 0.6 (no bindings: 689 bytes per instance, 52% full). So the fill
// follows the broker's bindings per instance, from its counters: split
// at 1/(1 + bindingGrowth × bindings per instance), between minRecordsFill
// and maxRecordsFill (room for an update of a record, a few bytes more):
// no bindings, 391 bytes of inv_records per instance (91% full). An
// import of a batch without whole values (an export's instances, whose
// bindings follow) splits at 1/(1+bindingGrowth).
func recordsFill(tx *bolt.Tx, broker string) float64 {
	instances := sumCounts(tx, instanceCountKey(broker, ""), nil)
	perInstance := float64(getCount(tx, bindingCountKey(broker))) / float64(max(instances, 1))
	return min(maxRecordsFill, max(minRecordsFill, 1/(1+bindingGrowth*perInstance)))
}

const (
	bindingGrowth  = 0.7
	minRecordsFill = 0.5
	maxRecordsFill = 0.95
)

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
	at, err := recordExpiry(old)
	if err != nil {
		return fmt.Errorf("%w: binding %q: decode record: %w", ErrUnavailable, k, err)
	}
	if at.IsZero() {
		return nil
	}
	return t.expiries.Delete(timeKey(at, k))
}

func (s *boltStore) PutInstance(ctx context.Context, in Instance) (Instance, error) {
	if err := ctx.Err(); err != nil {
		return Instance{}, err
	}
	in, rec, err := prepareInstance(in, s.now())
	if err != nil {
		return Instance{}, err
	}
	err = s.write(ctx, func(tx *bolt.Tx) error {
		writeFills(tx, in.Broker)
		_, err := putInstanceTx(tx, in, rec, true)
		return err
	})
	if err != nil {
		return Instance{}, err
	}
	return in, nil
}

func (s *boltStore) GetInstance(ctx context.Context, broker, instanceID string) (Instance, error) {
	if err := ctx.Err(); err != nil {
		return Instance{}, err
	}
	if err := checkInstanceKey(broker, instanceID); err != nil {
		return Instance{}, err
	}
	var in Instance
	var found bool
	err := s.read(ctx, func(tx *bolt.Tx) error {
		m, _, _, err := inventoryTx(tx).member(broker, instanceID)
		if found = len(m.instance) > 0; err != nil || !found {
			return err
		}
		in, err = decodeInstance(broker, instanceID, m.instance)
		return err
	})
	switch {
	case err != nil:
		return Instance{}, err
	case !found:
		return Instance{}, noInstance(broker, instanceID)
	}
	return in, nil
}

// badKey reports an inventory key that is not made as the layout says.
func badKey(k []byte) error {
	return fmt.Errorf("%w: inventory key %q has the wrong number of parts", ErrUnavailable, k)
}

func (s *boltStore) DeleteInstance(ctx context.Context, broker, instanceID string) ([]Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkInstanceKey(broker, instanceID); err != nil {
		return nil, err
	}
	var gone []Binding
	var found bool
	err := s.write(ctx, func(tx *bolt.Tx) error {
		gone = nil
		writeFills(tx, broker)
		t := inventoryTx(tx)
		m, seq, ok, err := t.member(broker, instanceID)
		if found = ok; err != nil || !found {
			return err
		}
		if gone, err = m.sortedBindings(broker); err != nil {
			return err
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
		if len(m.instance) > 0 {
			if err := unindexInstance(tx, broker, m.instance); err != nil {
				return err
			}
		}
		return t.put(broker, member{id: instanceID}, seq)
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, noInstance(broker, instanceID)
	}
	if len(gone) == 0 {
		gone = nil
	}
	return gone, nil
}

func (s *boltStore) PutBinding(ctx context.Context, bd Binding) (Binding, error) {
	if err := ctx.Err(); err != nil {
		return Binding{}, err
	}
	bd, rec, err := prepareBinding(bd, s.now())
	if err != nil {
		return Binding{}, err
	}
	err = s.write(ctx, func(tx *bolt.Tx) error {
		writeFills(tx, bd.Broker)
		_, err := putBindingTx(tx, bd, rec, true)
		return err
	})
	if err != nil {
		return Binding{}, err
	}
	return bd, nil
}

func (s *boltStore) GetBinding(ctx context.Context, broker, instanceID, bindingID string) (Binding, error) {
	if err := ctx.Err(); err != nil {
		return Binding{}, err
	}
	if err := checkBindingKey(broker, instanceID, bindingID); err != nil {
		return Binding{}, err
	}
	var bd Binding
	var found bool
	err := s.read(ctx, func(tx *bolt.Tx) error {
		m, _, _, err := inventoryTx(tx).member(broker, instanceID)
		if err != nil {
			return err
		}
		i := m.binding(bindingID)
		if found = i >= 0; !found {
			return nil
		}
		bd, err = decodeBinding(broker, instanceID, bindingID, m.bindings[i].rec)
		return err
	})
	switch {
	case err != nil:
		return Binding{}, err
	case !found:
		return Binding{}, noBinding(broker, instanceID, bindingID)
	}
	return bd, nil
}

func (s *boltStore) DeleteBinding(ctx context.Context, broker, instanceID, bindingID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkBindingKey(broker, instanceID, bindingID); err != nil {
		return err
	}
	var found bool
	err := s.write(ctx, func(tx *bolt.Tx) error {
		writeFills(tx, broker)
		t := inventoryTx(tx)
		m, seq, _, err := t.member(broker, instanceID)
		if err != nil {
			return err
		}
		i := m.binding(bindingID)
		if found = i >= 0; !found {
			return nil
		}
		if err := t.unindexExpiry(expiryKey(broker, instanceID, bindingID), m.bindings[i].rec); err != nil {
			return err
		}
		m.bindings = slices.Delete(m.bindings, i, i+1)
		if err := t.put(broker, m, seq); err != nil {
			return err
		}
		return addCount(tx, bindingCountKey(broker), -1)
	})
	switch {
	case err != nil:
		return err
	case !found:
		return noBinding(broker, instanceID, bindingID)
	}
	return nil
}
