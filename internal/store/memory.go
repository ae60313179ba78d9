package store

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// memory is the "memory" backend: maps behind one mutex. Nothing survives
// the process; for tests and throwaway single-process runs.
type memory struct {
	now func() time.Time

	mu      sync.Mutex
	closed  bool
	locks   map[string]Lock
	orphans map[string]Orphan
	brokers map[string]*memBroker // the inventory, by broker
	// catalogs are the catalog records by broker, encoded
	// (memory_catalog.go).
	catalogs map[string][]byte
	usage    map[memUsageKey]struct{}
}

func newMemory(now func() time.Time) *memory {
	return &memory{now: now, locks: map[string]Lock{}, orphans: map[string]Orphan{}, brokers: map[string]*memBroker{},
		usage: map[memUsageKey]struct{}{}}
}

// begin checks ctx and takes the mutex; the caller must call m.mu.Unlock
// when it returns nil.
func (m *memory) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// live returns the lock key if it exists and has not expired at now.
func (m *memory) live(key string, now time.Time) (Lock, bool) {
	l, ok := m.locks[key]
	if !ok || Expired(l.Deadline, now) {
		return Lock{}, false
	}
	return l, true
}

// owned returns the live lock key if owner holds it, or the error saying
// why not.
func (m *memory) owned(key, owner string, now time.Time) (Lock, error) {
	l, ok := m.live(key, now)
	switch {
	case !ok:
		return Lock{}, NoLock(key)
	case l.Owner != owner:
		return Lock{}, fmt.Errorf("%w: lock %s", ErrNotOwner, key)
	}
	return l, nil
}

func (m *memory) Acquire(ctx context.Context, l Lock) (Lock, error) {
	if err := m.begin(ctx); err != nil {
		return Lock{}, err
	}
	defer m.mu.Unlock()
	now := m.now()
	l, err := PrepareLock(l, now)
	if err != nil {
		return Lock{}, err
	}
	if cur, ok := m.live(l.Key, now); ok && cur.Owner != l.Owner {
		return cur, HeldError(cur)
	}
	cur, taken := m.locks[l.Key]
	m.locks[l.Key] = l
	if taken && cur.Owner != l.Owner {
		l.Replaced = &cur // expired: taken over
	}
	return l, nil
}

func (m *memory) Update(ctx context.Context, l Lock) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	now := m.now()
	l, err := PrepareLock(l, now)
	if err != nil {
		return err
	}
	if _, err := m.owned(l.Key, l.Owner, now); err != nil {
		return err
	}
	m.locks[l.Key] = l
	return nil
}

func (m *memory) Release(ctx context.Context, key, owner string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, err := m.owned(key, owner, m.now()); err != nil {
		return err
	}
	delete(m.locks, key)
	return nil
}

func (m *memory) ForceRelease(ctx context.Context, key string) (Lock, error) {
	if err := m.begin(ctx); err != nil {
		return Lock{}, err
	}
	defer m.mu.Unlock()
	l, ok := m.live(key, m.now())
	if !ok {
		return Lock{}, NoLock(key)
	}
	delete(m.locks, key)
	return l, nil
}

func (m *memory) Get(ctx context.Context, key string) (Lock, error) {
	if err := m.begin(ctx); err != nil {
		return Lock{}, err
	}
	defer m.mu.Unlock()
	l, ok := m.live(key, m.now())
	if !ok {
		return Lock{}, ErrNotFound // unwrapped: Get runs on every poll, and a miss is the common case
	}
	return l, nil
}

func (m *memory) List(ctx context.Context, f ListFilter) ([]Lock, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if err := f.Check(); err != nil {
		return nil, err
	}
	now := m.now()
	var out []Lock
	for _, l := range m.locks {
		if (f.Expired || !Expired(l.Deadline, now)) && f.Matches(l) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, ByKey)
	return out, nil
}

func (m *memory) ExpireDue(ctx context.Context, now time.Time) ([]Lock, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []Lock
	for k, l := range m.locks {
		if Expired(l.Deadline, now) {
			out = append(out, l)
			delete(m.locks, k)
		}
	}
	slices.SortFunc(out, ByDeadline)
	return out, nil
}

func (m *memory) PutOrphan(ctx context.Context, o Orphan) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	o, err := PrepareOrphan(o, m.now())
	if err != nil {
		return err
	}
	m.orphans[o.ID] = o
	return nil
}

func (m *memory) GetOrphan(ctx context.Context, id string) (Orphan, error) {
	if err := m.begin(ctx); err != nil {
		return Orphan{}, err
	}
	defer m.mu.Unlock()
	o, ok := m.orphans[id]
	if !ok {
		return Orphan{}, NoOrphan(id)
	}
	return o, nil
}

func (m *memory) ListOrphans(ctx context.Context) ([]Orphan, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return slices.SortedFunc(maps.Values(m.orphans), ByID), nil
}

func (m *memory) DeleteOrphan(ctx context.Context, id string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, ok := m.orphans[id]; !ok {
		return NoOrphan(id)
	}
	delete(m.orphans, id)
	return nil
}

func (m *memory) DueOrphans(ctx context.Context, now time.Time, limit int) ([]Orphan, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return DueOrphans(slices.Collect(maps.Values(m.orphans)), now, limit), nil
}

func (m *memory) ClaimOrphan(ctx context.Context, id, claimant string, until time.Time) (Orphan, error) {
	if err := m.begin(ctx); err != nil {
		return Orphan{}, err
	}
	defer m.mu.Unlock()
	now := m.now()
	until, err := PrepareClaim(id, claimant, until, now)
	if err != nil {
		return Orphan{}, err
	}
	o, ok := m.orphans[id]
	if !ok {
		return Orphan{}, NoOrphan(id)
	}
	if o, err = Claim(o, claimant, until, now); err != nil {
		return o, err
	}
	m.orphans[id] = o
	return o, nil
}

func (m *memory) Ping(ctx context.Context) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	m.mu.Unlock()
	return nil
}

func (m *memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
