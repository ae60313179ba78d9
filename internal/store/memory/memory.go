// Package memory is the "memory" backend of internal/store: maps behind one
// mutex, inventory records kept encoded as on the other backends. Nothing
// survives the process; for tests and throwaway single-process runs. It
// passes storetest.Contract, like every backend.
package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// memory is the "memory" backend: maps behind one mutex. Nothing survives
// the process; for tests and throwaway single-process runs.
type memory struct {
	now func() time.Time

	mu      sync.Mutex
	closed  bool
	locks   map[string]store.Lock
	orphans map[string]store.Orphan
	brokers map[string]*memBroker // the inventory, by broker
	// catalogs are the catalog records by broker, encoded
	// (catalog.go).
	catalogs map[string][]byte
	usage    map[memUsageKey]struct{}
	// sessions are the console's sessions, encoded (session.go).
	sessions map[store.SessionKey][]byte
}

// New returns an empty Store kept in memory. now is the store's clock
// (nil means time.Now); it decides which locks have expired.
func New(now func() time.Time) store.Store {
	if now == nil {
		now = time.Now
	}
	return &memory{now: now, locks: map[string]store.Lock{}, orphans: map[string]store.Orphan{}, brokers: map[string]*memBroker{},
		usage: map[memUsageKey]struct{}{}, sessions: map[store.SessionKey][]byte{}}
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
		return store.ErrClosed
	}
	return nil
}

// live returns the lock key if it exists and has not expired at now.
func (m *memory) live(key string, now time.Time) (store.Lock, bool) {
	l, ok := m.locks[key]
	if !ok || store.Expired(l.Deadline, now) {
		return store.Lock{}, false
	}
	return l, true
}

// owned returns the live lock key if owner holds it, or the error saying
// why not.
func (m *memory) owned(key, owner string, now time.Time) (store.Lock, error) {
	l, ok := m.live(key, now)
	switch {
	case !ok:
		return store.Lock{}, store.NoLock(key)
	case l.Owner != owner:
		return store.Lock{}, fmt.Errorf("%w: lock %s", store.ErrNotOwner, key)
	}
	return l, nil
}

func (m *memory) Acquire(ctx context.Context, l store.Lock) (store.Lock, error) {
	if err := m.begin(ctx); err != nil {
		return store.Lock{}, err
	}
	defer m.mu.Unlock()
	now := m.now()
	l, err := store.PrepareLock(l, now)
	if err != nil {
		return store.Lock{}, err
	}
	if cur, ok := m.live(l.Key, now); ok && cur.Owner != l.Owner {
		return cur, store.HeldError(cur)
	}
	cur, taken := m.locks[l.Key]
	m.locks[l.Key] = l
	if taken && cur.Owner != l.Owner {
		l.Replaced = &cur // expired: taken over
	}
	return l, nil
}

func (m *memory) Update(ctx context.Context, l store.Lock) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	now := m.now()
	l, err := store.PrepareLock(l, now)
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

func (m *memory) ForceRelease(ctx context.Context, key string) (store.Lock, error) {
	if err := m.begin(ctx); err != nil {
		return store.Lock{}, err
	}
	defer m.mu.Unlock()
	l, ok := m.live(key, m.now())
	if !ok {
		return store.Lock{}, store.NoLock(key)
	}
	delete(m.locks, key)
	return l, nil
}

func (m *memory) Get(ctx context.Context, key string) (store.Lock, error) {
	if err := m.begin(ctx); err != nil {
		return store.Lock{}, err
	}
	defer m.mu.Unlock()
	l, ok := m.live(key, m.now())
	if !ok {
		return store.Lock{}, store.ErrNotFound // unwrapped: Get runs on every poll, and a miss is the common case
	}
	return l, nil
}

func (m *memory) List(ctx context.Context, f store.ListFilter) ([]store.Lock, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if err := f.Check(); err != nil {
		return nil, err
	}
	now := m.now()
	var out []store.Lock
	for _, l := range m.locks {
		if (f.Expired || !store.Expired(l.Deadline, now)) && f.Matches(l) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, store.ByKey)
	return out, nil
}

func (m *memory) ExpireDue(ctx context.Context, now time.Time) ([]store.Lock, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []store.Lock
	for k, l := range m.locks {
		if store.Expired(l.Deadline, now) {
			out = append(out, l)
			delete(m.locks, k)
		}
	}
	slices.SortFunc(out, store.ByDeadline)
	return out, nil
}

func (m *memory) PutOrphan(ctx context.Context, o store.Orphan) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	o, err := store.PrepareOrphan(o, m.now())
	if err != nil {
		return err
	}
	m.orphans[o.ID] = o
	return nil
}

func (m *memory) GetOrphan(ctx context.Context, id string) (store.Orphan, error) {
	if err := m.begin(ctx); err != nil {
		return store.Orphan{}, err
	}
	defer m.mu.Unlock()
	o, ok := m.orphans[id]
	if !ok {
		return store.Orphan{}, store.NoOrphan(id)
	}
	return o, nil
}

func (m *memory) ListOrphans(ctx context.Context) ([]store.Orphan, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return slices.SortedFunc(maps.Values(m.orphans), store.ByID), nil
}

func (m *memory) DeleteOrphan(ctx context.Context, id string) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, ok := m.orphans[id]; !ok {
		return store.NoOrphan(id)
	}
	delete(m.orphans, id)
	return nil
}

func (m *memory) DueOrphans(ctx context.Context, now time.Time, limit int) ([]store.Orphan, error) {
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return store.DueOrphans(slices.Collect(maps.Values(m.orphans)), now, limit), nil
}

func (m *memory) ClaimOrphan(ctx context.Context, id, claimant string, until time.Time) (store.Orphan, error) {
	if err := m.begin(ctx); err != nil {
		return store.Orphan{}, err
	}
	defer m.mu.Unlock()
	now := m.now()
	until, err := store.PrepareClaim(id, claimant, until, now)
	if err != nil {
		return store.Orphan{}, err
	}
	o, ok := m.orphans[id]
	if !ok {
		return store.Orphan{}, store.NoOrphan(id)
	}
	if o, err = store.Claim(o, claimant, until, now); err != nil {
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

// AcquireReading is Acquire and then GetInstance (store.AcquireThenRead):
// neither costs a round trip.
func (m *memory) AcquireReading(ctx context.Context, l store.Lock) (store.Lock, *store.Instance, error) {
	return store.AcquireThenRead(ctx, m, l)
}
