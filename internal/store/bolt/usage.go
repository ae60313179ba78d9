package bolt

import (
	"context"
	"iter"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// Usage records on the bolt backend: inv_usage, keyed by the record's
// Deleted (timeKey) and its encoding (encodeUsage), with empty values. Keys
// in time order make a report from a time and a purge before one a seek and
// a walk over the records concerned. A record is written in the
// transaction of the inventory change that ends it.

// usageFill is how full bbolt fills the pages of inv_usage: keys come in
// time order, at the end of the tree.
const usageFill = 0.95

// putUsageTx writes rs in tx.
func putUsageTx(tx *bolt.Tx, rs ...store.UsageRecord) error {
	b := tx.Bucket(bucketUsage)
	b.FillPercent = usageFill
	for _, r := range rs {
		if err := b.Put(timeKey(r.Deleted, string(store.EncodeUsage(r))), nil); err != nil {
			return err
		}
	}
	return nil
}

// replanTx writes the usage record of a put of in that changes the plan of
// the stored instance.
func replanTx(tx *bolt.Tx, in store.Instance, now time.Time) error {
	v, _, _, err := inventoryTx(tx).value(in.Broker, in.InstanceID)
	if err != nil {
		return err
	}
	r, replan, err := store.ReplanUsage(v.instance, in, now)
	if err != nil || !replan {
		return err
	}
	return putUsageTx(tx, r)
}

func (s *boltStore) UsageRecords(ctx context.Context, broker string, after time.Time) iter.Seq2[store.UsageRecord, error] {
	return func(yield func(store.UsageRecord, error) bool) {
		// start after every key of the microsecond after: timeKey of
		// after+1µs is the smallest such key.
		from := timeKey(after.Add(time.Microsecond), "")
		for {
			var page []store.UsageRecord
			var next []byte
			err := s.read(ctx, func(tx *bolt.Tx) error {
				page, next = page[:0], nil
				c := tx.Bucket(bucketUsage).Cursor()
				n := 0
				for k, _ := c.Seek(from); k != nil; k, _ = c.Next() {
					if n == store.UsagePage {
						next = append([]byte(nil), k...)
						return nil
					}
					n++
					if len(k) < 8 {
						return store.BadKey(k)
					}
					r, err := store.DecodeUsage(k[8:], timeOf(k))
					if err != nil {
						return err
					}
					if broker == "" || r.Broker == broker {
						page = append(page, r)
					}
				}
				return nil
			})
			if err != nil {
				yield(store.UsageRecord{}, err)
				return
			}
			for _, r := range page {
				if !yield(r, nil) {
					return
				}
			}
			if next == nil {
				return
			}
			from = next
		}
	}
}

func (s *boltStore) PurgeUsage(ctx context.Context, before time.Time) (int, error) {
	total := 0
	end := timeKey(before, "")
	for {
		n := 0
		err := s.write(ctx, func(tx *bolt.Tx) error {
			n = 0
			b := tx.Bucket(bucketUsage)
			c := b.Cursor()
			for k, _ := c.First(); k != nil && n < store.UsagePage && string(k) < string(end); k, _ = c.First() {
				if err := c.Delete(); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < store.UsagePage {
			return total, nil
		}
	}
}
