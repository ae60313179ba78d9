package bolt

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// committer makes concurrent bolt writes share transactions (group
// commit) without waiting for company: a writer that finds no commit
// running commits at once, taking with it every write queued by then;
// writes that arrive during a commit queue up, and when it ends the
// longest-waiting of them commits them all together.
//
// bbolt's own DB.Batch waits a timer (DB.MaxBatchDelay) before every
// commit instead. An idle Go runtime wakes timers with about a millisecond
// of granularity on Linux, so a lone writer would pay a millisecond or more
// on every call (measured: 1.5 ms per write with any delay above zero,
// 0.4 ms without), while a zero delay loses the sharing. A commit costs
// two fsyncs, which is what sharing saves.
type committer struct {
	db *bolt.DB

	mu    sync.Mutex
	busy  bool       // a leader is committing or about to
	queue []*pending // writes waiting for the next commit
}

// pending is one queued write.
type pending struct {
	fn  func(tx *bolt.Tx) error
	err error
	// wake tells a waiting writer that its write is done (false; see err)
	// or that it is to commit the queue (true).
	wake chan bool
}

// run runs fn in a read-write transaction, possibly shared with other
// writes, and returns fn's error or the commit's. fn must not keep state
// across runs: it runs again, alone, if its shared transaction fails.
func (c *committer) run(fn func(tx *bolt.Tx) error) error {
	p := &pending{fn: fn, wake: make(chan bool, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	lead := !c.busy
	c.busy = true
	c.mu.Unlock()
	if !lead {
		lead = <-p.wake
	}
	if !lead {
		return p.err
	}

	c.mu.Lock()
	batch := c.queue
	c.queue = nil
	c.mu.Unlock()
	c.commit(batch)
	for _, q := range batch {
		if q != p {
			q.wake <- false
		}
	}

	c.mu.Lock()
	if len(c.queue) == 0 {
		c.busy = false
		c.mu.Unlock()
	} else {
		next := c.queue[0]
		c.mu.Unlock()
		next.wake <- true
	}
	return p.err
}

// commit runs batch in one transaction, or, if that fails, each write in
// its own, so that one write's error is not every write's.
func (c *committer) commit(batch []*pending) {
	err := c.db.Update(func(tx *bolt.Tx) error {
		for _, p := range batch {
			if err := p.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(batch) == 1 {
		for _, p := range batch {
			p.err = err
		}
		return
	}
	for _, p := range batch {
		p.err = c.db.Update(p.fn)
	}
}
