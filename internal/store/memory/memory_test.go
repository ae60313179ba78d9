package memory

import (
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Contract(t, storetest.Backend{Open: openMemoryForTest})
}

func openMemoryForTest(t *testing.T, now func() time.Time) store.Store {
	s := New(now)
	t.Cleanup(func() { s.Close() })
	return s
}
