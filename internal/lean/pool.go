package lean

import (
	"context"
	"time"
)

// pool is one host's idle connections, the most recently used last.
// Transport.mu guards it.
type pool struct {
	idle  []*conn
	timer *time.Timer // closes connections idle past IdleConnTimeout; nil: not armed
}

func (t *Transport) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

// conn returns a connection for key: the most recently pooled one unless
// fresh, else a new one. probe asks for a pooled connection to be checked
// for a close or bytes the broker sent while it was idle.
func (t *Transport) conn(ctx context.Context, key poolKey, fresh, probe bool) (*conn, error) {
	for !fresh {
		c := t.take(key)
		if c == nil {
			break
		}
		if probe && !c.idleAlive() {
			c.close()
			continue
		}
		return c, nil
	}
	return t.dial(ctx, key)
}

// take pops the most recently pooled live connection of key, or nil.
func (t *Transport) take(key poolKey) *conn {
	var expired []*conn
	t.mu.Lock()
	p := t.pools[key]
	var c *conn
	if p != nil && len(p.idle) > 0 {
		n := len(p.idle) - 1
		c, p.idle[n], p.idle = p.idle[n], nil, p.idle[:n]
		c.idleFor = t.clock().Sub(c.idleAt)
		if t.IdleConnTimeout > 0 && c.idleFor > t.IdleConnTimeout {
			// Every connection below it is older: the whole pool expired.
			expired = append(p.idle, c)
			p.idle = make([]*conn, 0, cap(p.idle))
			c = nil
		}
	}
	t.mu.Unlock()
	for _, e := range expired {
		e.close()
	}
	if c != nil {
		c.reused = true
	}
	return c
}

// put pools c, or closes it when the pool is full or the transport closed.
func (t *Transport) put(key poolKey, c *conn) {
	t.mu.Lock()
	if t.pools == nil {
		t.pools = make(map[poolKey]*pool)
	}
	p := t.pools[key]
	if p == nil {
		p = &pool{}
		t.pools[key] = p
	}
	maxIdle := t.MaxIdleConns
	if maxIdle <= 0 {
		maxIdle = DefaultMaxIdleConns
	}
	if t.closed || len(p.idle) >= maxIdle {
		t.mu.Unlock()
		c.close()
		return
	}
	c.idleAt = t.clock()
	p.idle = append(p.idle, c)
	if t.IdleConnTimeout > 0 && p.timer == nil {
		p.timer = time.AfterFunc(t.IdleConnTimeout, func() { t.expire(key) })
	}
	t.mu.Unlock()
}

// expire closes key's connections idle past IdleConnTimeout and arms the
// timer again for the oldest one left. One timer per host, not per
// connection.
func (t *Transport) expire(key poolKey) {
	t.mu.Lock()
	p := t.pools[key]
	if p == nil {
		t.mu.Unlock()
		return
	}
	now := t.clock()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].idleAt) >= t.IdleConnTimeout {
		n++
	}
	expired := append([]*conn(nil), p.idle[:n]...)
	rest := copy(p.idle, p.idle[n:])
	clear(p.idle[rest:])
	p.idle = p.idle[:rest]
	p.timer = nil
	if rest > 0 {
		p.timer = time.AfterFunc(t.IdleConnTimeout-now.Sub(p.idle[0].idleAt), func() { t.expire(key) })
	}
	t.mu.Unlock()
	for _, c := range expired {
		c.close()
	}
}

// idleConns reports how many connections key's pool holds (tests).
func (t *Transport) idleConns(key poolKey) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.pools[key]; p != nil {
		return len(p.idle)
	}
	return 0
}
