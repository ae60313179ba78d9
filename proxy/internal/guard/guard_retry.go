package guard

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Backoff of the retry queue: the first retry comes after retryMin, each
// later one after twice the wait before, at most retryMax. A lock whose
// release the store refused thus outlives the store's outage by at most
// retryMax.
const (
	retryMin = 250 * time.Millisecond
	RetryMax = 5 * time.Second
)

// Pending is one settlement the store has not taken yet.
type Pending struct {
	// lock is released (by Key and Owner) once cancelOrphan is done, unless
	// keep is set (the lock stays, as an async operation).
	Lock store.Lock
	// cancelOrphan is the ID of an orphan to delete first: a success the
	// platform saw cancels a pending mitigation before the lock goes.
	cancelOrphan string
	// putOrphan is an orphan candidate to record first, while lock (still
	// held by its owner) keeps platform calls away; if the lock lapsed in
	// the meantime, the instance may be the platform's again, and the
	// candidate is dropped and logged for the operator instead.
	PutOrphan *store.Orphan
	Keep      bool
	// outcome, when set, makes lock the outcome of a call of the async
	// shim, written (Update) after the orphan work above and after record,
	// so that no poll reports it before they are done; the lock stays. It
	// is dropped when the lock ended or a poll settled the operation in
	// the meantime.
	Outcome bool
	// async, when set, makes lock (Async, Operation and Deadline set) the
	// async operation a 202 the platform got started, written (Update)
	// after the orphan work and the record: a poll that reports the
	// operation's end, or the watch, then releases it, where the call's
	// own lock would block the instance to its deadline (the 30-minute
	// campaign's "store paused as a 202 comes"). It is dropped when the
	// lock ended meanwhile, and by a release of the same lock queued
	// after it.
	async bool
	// record, when set, writes the inventory record of a call's answer
	// (before a shimmed call's outcome, before the lock's release).
	Record func(context.Context) error
	// Unconfirmed marks a lock whose Acquire got no answer: the store may
	// have taken it, or may yet (a command it had queued while paused). It
	// is released, by its owner, until the store has answered twice, one
	// backoff step apart, that it is gone; then no queued acquire can
	// bring it back.
	Unconfirmed bool
	answered    int
	// poll, when set, is a poll answer that ended an operation whose lock
	// the poll could not read; lock is then unused.
	poll *pollSeen
	// cause is the store's error, for the first log line.
	Cause error
}

// pollSeen is a last_operation answer seen while the store was down.
type pollSeen struct {
	key    string
	call   rules.Call
	answer rules.Answer // what the poll's answer said
	seen   time.Time    // when the platform got it
}

// key is the lock key p settles, for logs.
func (p Pending) key() string {
	if p.poll != nil {
		return p.poll.key
	}
	return p.Lock.Key
}

// id keys p in the queue: one entry per lock and owner, or per polled key.
func (p Pending) id() string {
	if p.poll != nil {
		return "poll\x00" + p.poll.key
	}
	return "lock\x00" + p.Lock.Key + "\x00" + p.Lock.Owner
}

// releaser retries the settlements the store refused (releases, orphan
// cancellations, polls that ended an operation) until the store takes
// them: a terminal answer the platform has seen never leaves a lock behind
// for longer than the store's outage. One goroutine works the queue while
// it is not empty. A releaser outlives reloads (the Gateway built by a
// reload takes its predecessor's); Close ends it. Safe for concurrent use.
type releaser struct {
	st      store.Store
	log     *slog.Logger
	metrics *metrics.Metrics

	mu      sync.Mutex
	queue   map[string]Pending
	running bool
	closed  bool
	Stop    chan struct{}
	// kick wakes the worker at once (tests, and a store that is back).
	kick chan struct{}
	// polled, when set, records in the inventory what a poll answer that
	// ended an operation tells (settlePoll), under the lock before its
	// release: the latest Gateway's (a releaser outlives reloads).
	Polled atomic.Pointer[func(context.Context, store.Lock, rules.Answer) error]
}

func NewReleaser(st store.Store, log *slog.Logger, m *metrics.Metrics) *releaser {
	return &releaser{st: st, log: log, metrics: m, queue: map[string]Pending{},
		Stop: make(chan struct{}), kick: make(chan struct{}, 1)}
}

// Add queues p, logs it at error level and counts it, and starts the worker
// if it is not running.
func (r *releaser) Add(p Pending) {
	what := "lock release failed; retrying until the operation state takes it"
	if p.Record != nil {
		what = "inventory record not written; the lock is kept and both are retried until the operation state takes them"
	}
	if p.cancelOrphan != "" {
		what = "orphan cancellation failed; the lock is kept and both are retried until the operation state takes them"
	}
	if p.PutOrphan != nil {
		what = "orphan candidate not recorded; the lock is kept and both are retried until the operation state takes them"
	}
	if p.poll != nil {
		what = "a poll answer ended an operation while the operation state was unavailable; its lock is released once the state answers"
	}
	if p.async {
		what = "async operation not recorded yet; the call's lock is kept and made the async operation once the operation state takes it"
	}
	if p.Outcome {
		what = "async shim: outcome not recorded yet; this replica keeps it and retries until the operation state takes it (polls say in progress meanwhile)"
	}
	if p.Unconfirmed {
		what = "the operation state did not confirm a lock's acquire; its owner releases it once the state answers"
	}
	attrs := []slog.Attr{slog.String("key", p.key())}
	if p.Cause != nil {
		attrs = append(attrs, slog.String("error", p.Cause.Error()))
	}
	r.log.LogAttrs(context.Background(), slog.LevelError, what, attrs...)
	r.metrics.StoreError("release")
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if old, ok := r.queue[p.id()]; ok {
		p = merged(old, p)
	}
	r.queue[p.id()] = p
	if !r.running {
		r.running = true
		go r.work()
	}
}

// merged is p queued over old, an entry for the same lock and owner: a
// shim's outcome joins the orphan work its call's answer left pending,
// which goes first.
func merged(old, p Pending) Pending {
	if p.cancelOrphan == "" {
		p.cancelOrphan = old.cancelOrphan
	}
	if p.PutOrphan == nil {
		p.PutOrphan = old.PutOrphan
	}
	if !p.Outcome && old.Outcome {
		p.Lock, p.Outcome = old.Lock, true
	}
	if p.Record == nil {
		p.Record = old.Record
	}
	if !p.async && old.async && (p.Keep || p.Outcome) {
		p.async = true
		if !p.Outcome {
			p.Lock = old.Lock
		}
	}
	p.Keep = p.Keep || old.Keep || p.Outcome
	return p
}

// Len returns how many settlements wait for the store.
func (r *releaser) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.queue)
}

// RetryNow makes the worker try again at once instead of at its next
// backoff step.
func (r *releaser) RetryNow() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Close stops the worker; what is still queued is logged and dropped (the
// locks then expire at their deadlines).
func (r *releaser) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	close(r.Stop)
	if n := len(r.queue); n > 0 {
		r.log.LogAttrs(context.Background(), slog.LevelError, "stopping with settlements the operation state never took; their locks expire at their deadlines",
			slog.Int("pending", n))
	}
}

// work retries the queue with backoff until it is empty or closed.
func (r *releaser) work() {
	wait := retryMin
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-r.Stop:
			return
		case <-t.C:
		case <-r.kick:
		}
		if r.flush() == 0 {
			r.mu.Lock()
			if len(r.queue) == 0 {
				r.running = false
				r.mu.Unlock()
				return
			}
			r.mu.Unlock()
		}
		wait = min(2*wait, RetryMax)
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(wait)
	}
}

// flush tries every queued settlement once and returns how many are left.
func (r *releaser) flush() int {
	r.mu.Lock()
	items := make([]Pending, 0, len(r.queue))
	for _, p := range r.queue {
		items = append(items, p)
	}
	r.mu.Unlock()
	for _, p := range items {
		ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
		err := r.settle(ctx, p)
		cancel()
		if err != nil {
			continue
		}
		if p.Unconfirmed && p.answered == 0 {
			// Gone once; once more, a backoff step later, in case the
			// store ran a queued acquire after this release.
			r.mu.Lock()
			if cur, ok := r.queue[p.id()]; ok && cur.Unconfirmed {
				cur.answered++
				r.queue[p.id()] = cur
			}
			r.mu.Unlock()
			continue
		}
		r.mu.Lock()
		if cur, ok := r.queue[p.id()]; ok && cur.cancelOrphan == p.cancelOrphan && cur.PutOrphan == p.PutOrphan && cur.Outcome == p.Outcome {
			delete(r.queue, p.id())
		}
		r.mu.Unlock()
		r.log.LogAttrs(context.Background(), slog.LevelInfo, "operation state back: pending settlement done",
			slog.String("key", p.key()))
	}
	return r.Len()
}

// settle carries p out once; nil means done (or nothing left to do).
func (r *releaser) settle(ctx context.Context, p Pending) error {
	if p.poll != nil {
		return r.settlePoll(ctx, p.poll)
	}
	if p.PutOrphan != nil {
		l, err := r.st.Get(ctx, p.Lock.Key)
		switch {
		case errors.Is(err, store.ErrNotFound) || (err == nil && l.Owner != p.Lock.Owner):
			r.log.LogAttrs(ctx, slog.LevelError, "orphan candidate dropped: its lock lapsed while the operation state was unavailable, so the instance may be the platform's again; the operator must check it",
				slog.String("broker", p.PutOrphan.Broker), slog.String("instance_id", p.PutOrphan.InstanceID),
				slog.String("binding_id", p.PutOrphan.BindingID), slog.String("reason", p.PutOrphan.Reason))
			return nil
		case err != nil:
			return err
		}
		if err := r.st.PutOrphan(ctx, *p.PutOrphan); err != nil {
			return err
		}
	}
	if p.cancelOrphan != "" {
		if err := r.st.DeleteOrphan(ctx, p.cancelOrphan); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	if p.Record != nil {
		if err := p.Record(ctx); err != nil {
			return err
		}
	}
	if p.Outcome {
		return r.writeOutcome(ctx, p.Lock)
	}
	if p.async {
		err := r.st.Update(ctx, p.Lock)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotOwner) {
			return nil
		}
		return err
	}
	if p.Keep {
		return nil
	}
	err := r.st.Release(ctx, p.Lock.Key, p.Lock.Owner)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotOwner) {
		return nil
	}
	return err
}

// settlePoll releases the lock at ps.key if it is the async operation the
// poll was about, started before the poll's answer was seen, and the
// answer ended it.
func (r *releaser) settlePoll(ctx context.Context, ps *pollSeen) error {
	l, err := r.st.Get(ctx, ps.key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !l.Async || !polls(ps.call, l) || l.Started.After(ps.seen) || !ps.answer.Ends(rules.LockedBy(l.Kind)) {
		return nil // a newer operation, or not one this answer ends
	}
	if f := r.Polled.Load(); f != nil {
		// The outcome the platform was told, in the inventory before the
		// lock goes, as a poll that saw the lock records it (the 30-minute
		// campaign's "store paused during a poll that ends an operation":
		// the record of a success stayed "in progress"); a record the
		// store does not take keeps the lock, and this is tried again.
		if err := (*f)(ctx, l, ps.answer); err != nil {
			return err
		}
	}
	err = r.st.Release(ctx, l.Key, l.Owner)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotOwner) {
		return nil
	}
	return err
}

// writeOutcome writes l, the outcome of a call of the async shim, into its
// lock, unless the lock ended (its deadline, an operator) or a poll settled
// the operation meanwhile; both are logged, and nothing is left to do.
func (r *releaser) writeOutcome(ctx context.Context, l store.Lock) error {
	cur, err := r.st.Get(ctx, l.Key)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && (cur.Owner != l.Owner || cur.Shim.State != store.StateInProgress)):
		r.log.LogAttrs(ctx, slog.LevelError, "async shim: outcome dropped: its operation ended while the operation state was unavailable",
			slog.String("key", l.Key), slog.String("operation", l.Operation), slog.String("state", l.Shim.State))
		return nil
	case err != nil:
		return err
	}
	l.Deadline = Later(l.Deadline, cur.Deadline)
	err = r.st.Update(ctx, l)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotOwner) {
		return nil
	}
	return err
}
