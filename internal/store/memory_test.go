package store

import (
	"testing"
	"time"
)

func TestMemory(t *testing.T) {
	testContract(t, backend{open: openMemoryForTest})
}

func openMemoryForTest(t *testing.T, now func() time.Time) Store {
	s, err := Open(Config{Backend: BackendMemory}, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
