package memory

import (
	"context"
	"iter"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The usage records of the memory backend (internal/store's usage.go says what they are).

// memUsageKey is the memory backend's key of a record: the Deleted in
// microseconds and the encoding.
type memUsageKey struct {
	deleted int64
	enc     string
}

// addUsage records rs in the memory backend; the caller holds the mutex.
func (m *memory) addUsage(rs ...store.UsageRecord) {
	for _, r := range rs {
		m.usage[memUsageKey{r.Deleted.UnixMicro(), string(store.EncodeUsage(r))}] = struct{}{}
	}
}

func (m *memory) UsageRecords(ctx context.Context, broker string, after time.Time) iter.Seq2[store.UsageRecord, error] {
	return func(yield func(store.UsageRecord, error) bool) {
		if err := m.begin(ctx); err != nil {
			yield(store.UsageRecord{}, err)
			return
		}
		var keys []memUsageKey
		t := after.UnixMicro()
		for k := range m.usage {
			if k.deleted > t {
				keys = append(keys, k)
			}
		}
		m.mu.Unlock()
		for _, k := range keys {
			r, err := store.DecodeUsage([]byte(k.enc), k.deleted)
			if err != nil {
				yield(store.UsageRecord{}, err)
				return
			}
			if broker != "" && r.Broker != broker {
				continue
			}
			if !yield(r, nil) {
				return
			}
		}
	}
}

func (m *memory) PurgeUsage(ctx context.Context, before time.Time) (int, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	t, n := before.UnixMicro(), 0
	for k := range m.usage {
		if k.deleted < t {
			delete(m.usage, k)
			n++
		}
	}
	return n, nil
}
