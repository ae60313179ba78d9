package osbtest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that servers, loggers and exporters may write
// from their goroutines while the test reads it. It is safe for concurrent
// use; the zero value is an empty buffer.
type Buffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

// Write appends p to the buffer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.b.Write(p)
}

// Snapshot returns what was written so far and in how many writes.
func (b *Buffer) Snapshot() (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String(), b.writes
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
