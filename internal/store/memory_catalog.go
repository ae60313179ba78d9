package store

import (
	"context"
	"slices"
	"strings"
)

// The catalog records of the memory backend: encoded records by broker,
// so that what a caller gets back shares nothing with what is kept.

func (m *memory) GetCatalogs(ctx context.Context, broker string) (BrokerCatalogs, error) {
	if err := m.begin(ctx); err != nil {
		return BrokerCatalogs{}, err
	}
	b, ok := m.catalogs[broker]
	m.mu.Unlock()
	if !ok {
		return BrokerCatalogs{}, NoCatalogs(broker)
	}
	return DecodeCatalogs(b)
}

func (m *memory) ListCatalogs(ctx context.Context) ([]BrokerCatalogs, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	raw := make([][]byte, 0, len(m.catalogs))
	for _, b := range m.catalogs {
		raw = append(raw, b)
	}
	m.mu.Unlock()
	out := make([]BrokerCatalogs, 0, len(raw))
	for _, b := range raw {
		bc, err := DecodeCatalogs(b)
		if err != nil {
			return nil, err
		}
		out = append(out, bc)
	}
	slices.SortFunc(out, func(a, b BrokerCatalogs) int { return strings.Compare(a.Broker, b.Broker) })
	return out, nil
}

func (m *memory) PutCatalogs(ctx context.Context, bc BrokerCatalogs, ifAccepted string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	bc, enc, err := PrepareCatalogs(bc)
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
		cur, err := DecodeCatalogs(old)
		if err != nil {
			return err
		}
		if cur.Accepted.Hash != ifAccepted {
			return ChangedCatalogs(bc.Broker, ifAccepted, cur.Accepted.Hash)
		}
	} else if ifAccepted != "" {
		return ChangedCatalogs(bc.Broker, ifAccepted, "")
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
		return NoCatalogs(broker)
	}
	delete(m.catalogs, broker)
	return nil
}
