package bolt

import (
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The console sessions of the bolt backend: one bucket, session key (the
// SHA-256 of the id) → encoded session. A put deletes the expired ones:
// the bucket holds about as many sessions as are live, a handful.

func (s *boltStore) PutSession(ctx context.Context, k store.SessionKey, se store.Session) error {
	_, enc, err := store.PrepareSession(se, s.now())
	if err != nil {
		return err
	}
	return s.write(ctx, func(tx *bolt.Tx) error {
		b, now := tx.Bucket(bucketSessions), s.now()
		var gone [][]byte
		if err := b.ForEach(func(key, v []byte) error {
			if x, err := store.DecodeSession(v); err != nil || store.Expired(x.Expires, now) {
				gone = append(gone, append([]byte(nil), key...))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, key := range gone {
			if err := b.Delete(key); err != nil {
				return err
			}
		}
		return b.Put(k[:], enc)
	})
}

func (s *boltStore) GetSession(ctx context.Context, k store.SessionKey) (store.Session, error) {
	var rec []byte
	err := s.read(ctx, func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketSessions).Get(k[:]); v != nil {
			rec = append([]byte(nil), v...)
		}
		return nil
	})
	if err != nil {
		return store.Session{}, err
	}
	return store.LiveSession(k, rec, rec != nil, s.now())
}

func (s *boltStore) DeleteSession(ctx context.Context, k store.SessionKey) error {
	return s.write(ctx, func(tx *bolt.Tx) error { return tx.Bucket(bucketSessions).Delete(k[:]) })
}
