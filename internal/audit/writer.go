package audit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// bufferSize is the write buffer of the interval and never policies.
const bufferSize = 64 << 10

// Writer appends chained records to a sink. Write is safe for concurrent
// use: one mutex orders the records, so the chain follows the order of
// Write calls. How soon a record is durable depends on the fsync policy:
// with "always" Write returns after the record is synced; otherwise
// records are buffered and written (and, with "interval", synced) every
// interval, when the buffer is full, and at Close.
type Writer struct {
	mu     sync.Mutex
	out    sink
	buf    *bufio.Writer
	prev   [64]byte // hash of the last record written, in hex
	policy string
	closed bool
	dirty  bool // records appended since the last background flush
	// onError receives errors of background flushes.
	onError func(error)
	stop    chan struct{}
	done    chan struct{}
}

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
}

// Options tune a Writer beyond its configuration.
type Options struct {
	// Stdout is where the stdout sink writes; nil: the sink is unusable.
	Stdout io.Writer
	// OnError receives the errors of background flushes and syncs, which
	// no caller sees otherwise (count and log them); nil: dropped.
	OnError func(error)
}

// Open opens the sink cfg names (cfg must be valid and Sink not "off"):
// for "file", the file at cfg.Path, continuing the chain from its last
// record (or its newest rotated file's); for "stdout", o.Stdout with a new
// chain.
func Open(cfg config.Audit, o Options) (*Writer, error) {
	var out sink
	prev := GenesisHash
	switch cfg.Sink {
	case config.AuditSinkFile:
		f, last, err := openRotating(cfg.Path, cfg.MaxSizeBytes(), cfg.MaxFiles)
		if err != nil {
			return nil, err
		}
		out, prev = f, last
	case config.AuditSinkStdout:
		if o.Stdout == nil {
			return nil, errors.New("audit: no standard output to write to")
		}
		out = stream{o.Stdout}
	default:
		return nil, fmt.Errorf("audit: sink %q writes nothing", cfg.Sink)
	}
	return newWriter(out, prev, cfg.Fsync, cfg.FsyncInterval, o.OnError), nil
}

func newWriter(out sink, prev, policy string, interval time.Duration, onError func(error)) *Writer {
	w := &Writer{out: out, policy: policy, onError: onError}
	copy(w.prev[:], prev)
	if policy != config.AuditFsyncAlways {
		w.buf = bufio.NewWriterSize(out, bufferSize)
		if interval <= 0 {
			interval = config.DefaultAuditFsyncInterval
		}
		w.stop, w.done = make(chan struct{}), make(chan struct{})
		go w.flushEvery(interval)
	}
	return w
}

// Write seals r into the chain and appends it. An error means the record
// may be lost; the chain then shows a break at the next record that is
// written, which is what a verifier should see. r is not changed, nor
// kept. Its encoder without reflection (encode.go) into a pooled buffer,
// measured against json.Marshal into a new one (BenchmarkWrite,
// callgrind): 4 allocations and 2.3 KB fewer per record (0 left), 36% fewer
// instructions, and 18% fewer for a whole audited call
// (BenchmarkChainCanned/gateway-1pct-audit).
func (w *Writer) Write(r *Record) error {
	buf := getBuffer()
	body, err := encode((*buf)[:0], r) // outside the lock: only the chaining is ordered
	if err != nil {
		putBuffer(buf, *buf)
		return fmt.Errorf("audit: encoding a record: %w", err)
	}
	err = w.append(body)
	putBuffer(buf, body)
	return err
}

// append chains an encoded body (see encode) to the last record and writes
// it, rotating first when the file would grow past its limit.
func (w *Writer) append(body []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errors.New("audit: write after close")
	}
	line, hash := chain(body, &w.prev)
	buffered := 0
	if w.buf != nil {
		buffered = w.buf.Buffered()
	}
	if w.out.needsRotation(buffered, len(line)) {
		if err := w.flushLocked(true); err != nil {
			return err
		}
		if err := w.out.rotate(); err != nil {
			return fmt.Errorf("audit: rotating: %w", err)
		}
	}
	w.prev = hash
	w.dirty = true
	if w.buf == nil { // always: write and sync now
		if _, err := w.out.Write(line); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		if err := w.out.sync(); err != nil {
			return fmt.Errorf("audit: sync: %w", err)
		}
		return nil
	}
	if _, err := w.buf.Write(line); err != nil {
		w.buf.Reset(w.out) // drop what failed; the chain will show the gap
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// Flush writes buffered records and syncs them, whatever the policy.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	return w.flushLocked(true)
}

// flushLocked writes the buffer out and syncs when sync is set.
func (w *Writer) flushLocked(sync bool) error {
	if w.buf != nil {
		if err := w.buf.Flush(); err != nil {
			w.buf.Reset(w.out)
			return fmt.Errorf("audit: %w", err)
		}
	}
	if sync {
		if err := w.out.sync(); err != nil {
			return fmt.Errorf("audit: sync: %w", err)
		}
	}
	return nil
}

// flushEvery writes the buffer out every interval until Close and, with
// the interval policy, syncs the file after releasing the lock: an fsync
// can take milliseconds, and Write must not wait for it. A file that
// rotation closed meanwhile was synced by the rotation.
func (w *Writer) flushEvery(interval time.Duration) {
	defer close(w.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.mu.Lock()
			dirty := w.dirty
			w.dirty = false
			err := w.flushLocked(false)
			var sync func() error
			if err == nil && dirty && w.policy == config.AuditFsyncInterval && !w.closed {
				sync = w.out.syncer()
			}
			w.mu.Unlock()
			if sync != nil {
				if serr := sync(); serr != nil && !errors.Is(serr, os.ErrClosed) {
					err = fmt.Errorf("audit: sync: %w", serr)
				}
			}
			if err != nil && w.onError != nil {
				w.onError(err)
			}
		}
	}
}

// Close flushes and syncs what is buffered and closes the sink. Writes
// after Close fail.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	if w.stop != nil {
		close(w.stop)
		<-w.done
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.flushLocked(w.policy != config.AuditFsyncNever), w.out.close())
}

// stream is a sink on a writer that is never rotated or synced, such as
// standard output.
type stream struct{ io.Writer }

func (stream) sync() error                 { return nil }
func (stream) syncer() func() error        { return nil }
func (stream) needsRotation(int, int) bool { return false }
func (stream) rotate() error               { return nil }
func (stream) close() error                { return nil }
