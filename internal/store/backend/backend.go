// Package backend opens the state store a Config names: it is the one place
// that knows every backend of internal/store (bolt, redis, memory), which
// themselves know only the contract in internal/store and not each other.
package backend

import (
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// Open returns the Store cfg describes, with defaults applied to its zero
// fields (store.Config.WithDefaults). now is the store's clock (nil means
// time.Now); it decides which locks have expired. Opening a bolt file
// another process holds fails after OpenTimeout with an error wrapping
// store.ErrUnavailable. Opening redis does not connect yet (like sql.Open):
// call Ping to check it can be reached. An unknown cfg.Backend is an error.
func Open(cfg store.Config, now func() time.Time) (store.Store, error) {
	return store.Open(cfg, now)
}
