package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The inventory of the bolt backend (layout in bolt.go). Each write is one
// transaction that changes a record, its expiry index entry and its
// counters together; listings seek to their prefix and read a page.
//
// There is no index by tenant: counts by tenant are counters, and a
// listing by tenant reads the records in key order from its cursor on,
// keeping those whose head names the tenant (no record is inflated for
// that). An index (inv_tenants: tenant NUL broker NUL instance id) cost
// 114 bytes of pages per instance in a file grown by puts, 8% of the
// inventory (BenchmarkInventoryFootprintBolt); a listing by tenant, which
// only the admin API asks for, now reads about 1/s times the records of
// its page for a tenant holding a share s of the instances (all of them
// after the cursor, for a tenant with none), in a read transaction that
// blocks no write.

// Counter keys.
func instanceCountKey(broker, tenant string) []byte {
	return []byte("i\x00" + broker + "\x00" + tenant)
}
func bindingCountKey(broker string) []byte { return []byte("b\x00" + broker) }

// addCount adds delta to the counter k, deleting it at zero.
func addCount(tx *bolt.Tx, k []byte, delta int64) error {
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

// putInstanceTx stores rec unless the instance exists and replace is false;
// it reports whether it stored it.
func putInstanceTx(tx *bolt.Tx, in Instance, rec []byte, replace bool) (bool, error) {
	k := []byte(instanceKey(in.Broker, in.InstanceID))
	b := tx.Bucket(bucketInstances)
	if old := b.Get(k); old != nil {
		if !replace {
			return false, nil
		}
		if err := unindexInstance(tx, in.Broker, old); err != nil {
			return false, err
		}
	}
	if err := b.Put(k, rec); err != nil {
		return false, err
	}
	return true, addCount(tx, instanceCountKey(in.Broker, in.Tenant), 1)
}

// unindexInstance removes the count of the stored record old.
func unindexInstance(tx *bolt.Tx, broker string, old []byte) error {
	tenant, _ := recordTenant(old)
	return addCount(tx, instanceCountKey(broker, tenant), -1)
}

// putBindingTx is putInstanceTx for a binding; it moves the binding's
// entry in the expiry index too.
func putBindingTx(tx *bolt.Tx, bd Binding, rec []byte, replace bool) (bool, error) {
	k := []byte(instanceKey(bd.Broker, bindingSubkey(bd.InstanceID, bd.BindingID)))
	b := tx.Bucket(bucketBindings)
	old := b.Get(k)
	if old != nil && !replace {
		return false, nil
	}
	if old != nil {
		if err := unindexExpiry(tx, k, old); err != nil {
			return false, err
		}
	}
	if err := b.Put(k, rec); err != nil {
		return false, err
	}
	if !bd.ExpiresAt.IsZero() {
		if err := tx.Bucket(bucketExpiry).Put(timeKey(bd.ExpiresAt, string(k)), nil); err != nil {
			return false, err
		}
	}
	if old != nil {
		return true, nil
	}
	return true, addCount(tx, bindingCountKey(bd.Broker), 1)
}

// expiryFill is how full bbolt fills the pages of the expiry index when
// PutBinding splits them (its default: 0.5). A binding's ExpiresAt is
// mostly later than the ones recorded before it (bind time plus the
// broker's lifetime), so the index grows at its end, where half-full pages
// would stay half empty: measured on bindings expiring 90 days after their
// bind (BenchmarkInventoryFootprintBolt), 0.9 takes the index from 240 to
// 128 bytes per binding, branch pages included. (Keys arriving in random
// order fare worse at 0.9 than at 0.5: Import chooses by its batch.)
const expiryFill = 0.9

// unindexExpiry removes the expiry index entry of the binding stored under
// k as the record old (none if it has no ExpiresAt).
func unindexExpiry(tx *bolt.Tx, k, old []byte) error {
	t, err := recordExpiry(old)
	if err != nil {
		return fmt.Errorf("%w: binding %q: decode record: %w", ErrUnavailable, k, err)
	}
	if t.IsZero() {
		return nil
	}
	return tx.Bucket(bucketExpiry).Delete(timeKey(t, string(k)))
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
		rec := tx.Bucket(bucketInstances).Get([]byte(instanceKey(broker, instanceID)))
		if found = rec != nil; !found {
			return nil
		}
		var err error
		in, err = decodeInstance(broker, instanceID, rec)
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

// bindingsUnder returns the bindings whose keys start with prefix (a
// broker NUL instance id NUL), decoded, in key order, and their keys.
func bindingsUnder(tx *bolt.Tx, prefix []byte) ([]Binding, [][]byte, error) {
	var out []Binding
	var keys [][]byte
	c := tx.Bucket(bucketBindings).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		bd, err := decodeBindingKey(k, v)
		if err != nil {
			return nil, nil, err
		}
		out, keys = append(out, bd), append(keys, bytes.Clone(k))
	}
	return out, keys, nil
}

// decodeBindingKey decodes a binding record under its bolt key.
func decodeBindingKey(k, v []byte) (Binding, error) {
	parts := splitKey(string(k))
	if len(parts) != 3 {
		return Binding{}, badKey(k)
	}
	return decodeBinding(parts[0], parts[1], parts[2], v)
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
	k := []byte(instanceKey(broker, instanceID))
	var gone []Binding
	var found bool
	err := s.write(ctx, func(tx *bolt.Tx) error {
		var keys [][]byte
		var err error
		if gone, keys, err = bindingsUnder(tx, append(bytes.Clone(k), 0)); err != nil {
			return err
		}
		for i, bk := range keys {
			if err := tx.Bucket(bucketBindings).Delete(bk); err != nil {
				return err
			}
			if t := gone[i].ExpiresAt; !t.IsZero() {
				if err := tx.Bucket(bucketExpiry).Delete(timeKey(t, string(bk))); err != nil {
					return err
				}
			}
		}
		if err := addCount(tx, bindingCountKey(broker), -int64(len(keys))); err != nil {
			return err
		}
		old := tx.Bucket(bucketInstances).Get(k)
		if found = old != nil || len(keys) > 0; old == nil {
			return nil
		}
		if err := unindexInstance(tx, broker, old); err != nil {
			return err
		}
		return tx.Bucket(bucketInstances).Delete(k)
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, noInstance(broker, instanceID)
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
		tx.Bucket(bucketExpiry).FillPercent = expiryFill
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
		rec := tx.Bucket(bucketBindings).Get([]byte(instanceKey(broker, bindingSubkey(instanceID, bindingID))))
		if found = rec != nil; !found {
			return nil
		}
		var err error
		bd, err = decodeBinding(broker, instanceID, bindingID, rec)
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
	k := []byte(instanceKey(broker, bindingSubkey(instanceID, bindingID)))
	var found bool
	err := s.write(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBindings)
		old := b.Get(k)
		if found = old != nil; !found {
			return nil
		}
		if err := unindexExpiry(tx, k, old); err != nil {
			return err
		}
		if err := b.Delete(k); err != nil {
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
