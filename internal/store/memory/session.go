package memory

import (
	"context"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The console sessions of the memory backend: a map by key, encoded as on
// the other backends.

func (m *memory) PutSession(ctx context.Context, k store.SessionKey, s store.Session) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	now := m.now()
	_, enc, err := store.PrepareSession(s, now)
	if err != nil {
		return err
	}
	for key, rec := range m.sessions { // drop the expired: the map stays as small as the live logins
		if se, err := store.DecodeSession(rec); err != nil || store.Expired(se.Expires, now) {
			delete(m.sessions, key)
		}
	}
	m.sessions[k] = enc
	return nil
}

func (m *memory) GetSession(ctx context.Context, k store.SessionKey) (store.Session, error) {
	if err := m.begin(ctx); err != nil {
		return store.Session{}, err
	}
	defer m.mu.Unlock()
	rec, ok := m.sessions[k]
	return store.LiveSession(k, rec, ok, m.now())
}

func (m *memory) DeleteSession(ctx context.Context, k store.SessionKey) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	delete(m.sessions, k)
	return nil
}
