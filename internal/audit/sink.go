package audit

// Where a Writer's lines go: the sink interface, and the stream sink
// (standard output); the rotating file sink is file.go's.

import (
	"io"
	"time"
)

// sink is where lines go: a rotating file or a stream.
type sink interface {
	io.Writer
	// sync makes what was written durable (no-op for streams).
	sync() error
	// syncer returns a function that makes what was written so far
	// durable and may be called without the writer's lock, while writes
	// go on; nil for streams.
	syncer() func() error
	// needsRotation reports whether a line of n bytes, after buffered
	// bytes not written yet, would grow a non-empty file past its limit;
	// rotate then starts a new file (the buffer is flushed first).
	needsRotation(buffered, n int) bool
	rotate() error
	close() error
	// head returns the head of what was written so far, the last record's
	// hash being last; false for sinks without one (streams).
	head(last string, keyID string, now time.Time) (Head, bool)
	// storeHead makes h the head that survives the process.
	storeHead(h Head) error
}

// stream is a sink on a writer that is never rotated or synced, such as
// standard output.
type stream struct{ io.Writer }

func (stream) sync() error                 { return nil }
func (stream) syncer() func() error        { return nil }
func (stream) needsRotation(int, int) bool { return false }
func (stream) rotate() error               { return nil }
func (stream) close() error                { return nil }

func (stream) head(string, string, time.Time) (Head, bool) { return Head{}, false }
func (stream) storeHead(Head) error                        { return nil }
