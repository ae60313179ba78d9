package bolt

import (
	"context"
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

func (s *boltStore) PutInstance(ctx context.Context, in store.Instance) (store.Instance, error) {
	in, _, err := s.PutInstanceCancelling(ctx, in, "")
	return in, err
}

// PutInstanceCancelling puts and deletes in one transaction: one commit.
func (s *boltStore) PutInstanceCancelling(ctx context.Context, in store.Instance, orphanID string) (store.Instance, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Instance{}, false, err
	}
	keep := in.Created.IsZero()
	in, rec, err := store.PrepareInstance(in, s.now())
	if err != nil {
		return store.Instance{}, false, err
	}
	var stored store.Instance
	var cancelled bool
	err = s.write(ctx, func(tx *bolt.Tx) error {
		writeFills(tx)
		put, putRec := in, rec
		if keep {
			v, _, _, err := inventoryTx(tx).value(in.Broker, in.InstanceID)
			if err != nil {
				return err
			}
			if put, putRec, err = store.KeepInstanceCreated(in, rec, v.instance); err != nil {
				return err
			}
		}
		if err := replanTx(tx, put, s.now()); err != nil {
			return err
		}
		if _, err := putInstanceTx(tx, put, putRec, true); err != nil {
			return err
		}
		stored, cancelled = put, false
		if orphanID == "" {
			return nil
		}
		cancelled, err = deleteOrphanTx(tx, orphanID)
		return err
	})
	if err != nil {
		return store.Instance{}, false, err
	}
	return stored, cancelled, nil
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
	keep := bd.Created.IsZero()
	bd, rec, err := store.PrepareBinding(bd, s.now())
	if err != nil {
		return store.Binding{}, err
	}
	var stored store.Binding
	err = s.write(ctx, func(tx *bolt.Tx) error {
		writeFills(tx)
		put, putRec := bd, rec
		if keep {
			t := inventoryTx(tx)
			v, _, _, err := t.value(bd.Broker, bd.InstanceID)
			if err != nil {
				return err
			}
			_, old, err := t.binding(bd.InstanceID, v, bd.BindingID)
			if err != nil {
				return err
			}
			if put, putRec, err = store.KeepBindingCreated(bd, rec, old); err != nil {
				return err
			}
		}
		stored = put
		_, err := putBindingTx(tx, put, putRec, true)
		return err
	})
	if err != nil {
		return store.Binding{}, err
	}
	return stored, nil
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
