package core

import (
	"context"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// HeldLock is the lock a mutating call holds while it runs.
type HeldLock struct {
	Lock    store.Lock // the lock in the store
	Settled bool       // converted to async, held after a timeout, or released
	// Platform is the platform's request context: the broker call runs
	// on without its cancellation, so the lock is settled by what the
	// broker did, and a platform gone by then is noticed here. Both
	// servers cancel it when the platform goes away (a reset, a failed
	// write), never for a half-close.
	Platform context.Context
	// Delivering: a success the platform must get or leave an orphan
	// (Status), settled once its answer is written (the guard's delivered).
	Delivering bool
	Status     int
	// Record is the inventory record of a delivering call the store did
	// not take: retried with the lock's release (nil: recorded).
	Record func(context.Context) error
	// Read: the guard read the instance's record in the round trip that
	// took the lock (store.Store.AcquireReading), the look under the lock
	// the owner stage asks for (Scope.OwnerUnseen); Instance is the
	// record, nil when the instance has none. The owner stage reads them
	// instead of the store.
	Read     bool
	Instance *store.Instance
}
