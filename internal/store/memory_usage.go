package store

import (
	"context"
	"iter"
	"time"
)

// The usage records of the memory backend (usage.go has what they are).

// memUsageKey is the memory backend's key of a record: the Deleted in
// microseconds and the encoding.
type memUsageKey struct {
	deleted int64
	enc     string
}

// addUsage records rs in the memory backend; the caller holds the mutex.
func (m *memory) addUsage(rs ...UsageRecord) {
	for _, r := range rs {
		m.usage[memUsageKey{r.Deleted.UnixMicro(), string(EncodeUsage(r))}] = struct{}{}
	}
}

func (m *memory) UsageRecords(ctx context.Context, broker string, after time.Time) iter.Seq2[UsageRecord, error] {
	return func(yield func(UsageRecord, error) bool) {
		if err := m.begin(ctx); err != nil {
			yield(UsageRecord{}, err)
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
			r, err := DecodeUsage([]byte(k.enc), k.deleted)
			if err != nil {
				yield(UsageRecord{}, err)
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
