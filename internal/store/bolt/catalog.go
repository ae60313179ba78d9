package bolt

import (
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The catalog records of the bolt backend: one bucket, broker name →
// encoded record.

func (s *boltStore) GetCatalogs(ctx context.Context, broker string) (store.BrokerCatalogs, error) {
	var raw []byte
	err := s.read(ctx, func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketCatalogs).Get([]byte(broker)); v != nil {
			raw = append([]byte(nil), v...)
		}
		return nil
	})
	switch {
	case err != nil:
		return store.BrokerCatalogs{}, err
	case raw == nil:
		return store.BrokerCatalogs{}, store.NoCatalogs(broker)
	}
	return store.DecodeCatalogs(raw)
}

func (s *boltStore) ListCatalogs(ctx context.Context) ([]store.BrokerCatalogs, error) {
	var out []store.BrokerCatalogs
	err := s.read(ctx, func(tx *bolt.Tx) error {
		out = out[:0]
		return tx.Bucket(bucketCatalogs).ForEach(func(_, v []byte) error {
			bc, err := store.DecodeCatalogs(v) // copies what it keeps
			if err != nil {
				return err
			}
			out = append(out, bc)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []store.BrokerCatalogs{}
	}
	return out, nil // bolt keys are in byte order: sorted by Broker
}

func (s *boltStore) PutCatalogs(ctx context.Context, bc store.BrokerCatalogs, ifAccepted string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	bc, enc, err := store.PrepareCatalogs(bc)
	if err != nil {
		return err
	}
	var outcome error
	err = s.write(ctx, func(tx *bolt.Tx) error {
		outcome = nil
		b := tx.Bucket(bucketCatalogs)
		cur := ""
		if v := b.Get([]byte(bc.Broker)); v != nil {
			old, err := store.DecodeCatalogs(v)
			if err != nil {
				return err
			}
			cur = old.Accepted.Hash
		}
		if cur != ifAccepted {
			outcome = store.ChangedCatalogs(bc.Broker, ifAccepted, cur)
			return nil
		}
		return b.Put([]byte(bc.Broker), enc)
	})
	if err != nil {
		return err
	}
	return outcome
}

func (s *boltStore) DeleteCatalogs(ctx context.Context, broker string) error {
	var outcome error
	err := s.write(ctx, func(tx *bolt.Tx) error {
		outcome = nil
		b := tx.Bucket(bucketCatalogs)
		if b.Get([]byte(broker)) == nil {
			outcome = store.NoCatalogs(broker)
			return nil
		}
		return b.Delete([]byte(broker))
	})
	if err != nil {
		return err
	}
	return outcome
}
