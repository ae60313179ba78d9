package bolt

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The bolt backend's expiry index: inv_expiry keys are the time of a
// binding's ExpiresAt followed by broker NUL instance id NUL binding id, so
// a read walks them in ExpiringBindings' order from the first key and
// stops at before, reading each binding from its instance's value.

func (s *boltStore) ExpiringBindings(ctx context.Context, broker string, before time.Time, limit int) ([]store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit, err := store.ExpiringArgs(broker, limit)
	if err != nil {
		return nil, err
	}
	var found []store.Binding
	err = s.read(ctx, func(tx *bolt.Tx) error {
		found = found[:0]
		t := inventoryTx(tx)
		walkExpiry(tx, before, func(k []byte) bool {
			parts := store.SplitKey(string(k))
			if len(parts) != 3 || broker != "" && parts[0] != broker {
				return true
			}
			v, _, _, verr := t.value(parts[0], parts[1])
			if err = verr; err != nil {
				return false
			}
			i, rec, berr := t.binding(parts[1], v, parts[2])
			if err = berr; err != nil {
				return false
			}
			if i < 0 { // an index entry without its record
				return true
			}
			bd, derr := store.DecodeBinding(parts[0], parts[1], parts[2], rec)
			if err = derr; err != nil {
				return false
			}
			found = append(found, bd)
			return len(found) < limit
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

func (s *boltStore) CountExpiring(ctx context.Context, before time.Time) (map[string]int, error) {
	counts := map[string]int{}
	err := s.read(ctx, func(tx *bolt.Tx) error {
		clear(counts)
		walkExpiry(tx, before, func(k []byte) bool {
			if i := bytes.IndexByte(k, 0); i > 0 {
				counts[string(k[:i])]++
			}
			return true
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// walkExpiry calls fn with the binding key (broker NUL instance id NUL
// binding id) of each expiry index entry before before, in order, while
// fn returns true. The key is valid during the transaction only.
func walkExpiry(tx *bolt.Tx, before time.Time, fn func(k []byte) bool) {
	end := timeKey(before, "")
	c := tx.Bucket(bucketExpiry).Cursor()
	for k, _ := c.First(); k != nil && bytes.Compare(k, end) < 0; k, _ = c.Next() {
		if len(k) > 8 && !fn(k[8:]) {
			return
		}
	}
}
