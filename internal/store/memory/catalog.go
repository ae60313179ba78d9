package memory

import (
	"context"
	"slices"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The catalog records of the memory backend: encoded records by broker,
// so that what a caller gets back shares nothing with what is kept.

func (m *memory) GetCatalogs(ctx context.Context, broker string) (store.BrokerCatalogs, error) {
	if err := m.begin(ctx); err != nil {
		return store.BrokerCatalogs{}, err
	}
	b, ok := m.catalogs[broker]
	m.mu.Unlock()
	if !ok {
		return store.BrokerCatalogs{}, store.NoCatalogs(broker)
	}
	return store.DecodeCatalogs(b)
}

func (m *memory) ListCatalogs(ctx context.Context) ([]store.BrokerCatalogs, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	raw := make([][]byte, 0, len(m.catalogs))
	for _, b := range m.catalogs {
		raw = append(raw, b)
	}
	m.mu.Unlock()
	out := make([]store.BrokerCatalogs, 0, len(raw))
	for _, b := range raw {
		bc, err := store.DecodeCatalogs(b)
		if err != nil {
			return nil, err
		}
		out = append(out, bc)
	}
	slices.SortFunc(out, func(a, b store.BrokerCatalogs) int { return strings.Compare(a.Broker, b.Broker) })
	return out, nil
}

func (m *memory) PutCatalogs(ctx context.Context, bc store.BrokerCatalogs, ifAccepted string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	bc, enc, err := store.PrepareCatalogs(bc)
	if err != nil {
		return err
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.catalogs == nil {
		m.catalogs = map[string][]byte{}
	}
	if old, ok := m.catalogs[bc.Broker]; ok {
		cur, err := store.DecodeCatalogs(old)
		if err != nil {
			return err
		}
		if cur.Accepted.Hash != ifAccepted {
			return store.ChangedCatalogs(bc.Broker, ifAccepted, cur.Accepted.Hash)
		}
	} else if ifAccepted != "" {
		return store.ChangedCatalogs(bc.Broker, ifAccepted, "")
	}
	m.catalogs[bc.Broker] = enc
	return nil
}

func (m *memory) DeleteCatalogs(ctx context.Context, broker string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, ok := m.catalogs[broker]; !ok {
		return store.NoCatalogs(broker)
	}
	delete(m.catalogs, broker)
	return nil
}
