package lean

// The hang-up watch: once a request has run for HangupAfter, a read of its
// connection that cancels the request's context when the client resets it.

import (
	"errors"
	"io"
	"net"
	"time"
)

// Watch states of a connection's request (serverConn.watch).
const (
	watchOff      = iota // no request to watch, or its body is unread
	watchArmed           // the timer may start a watch
	watchReading         // a watch reads the connection
	watchFinished        // the watch ended
)

// errClientGone is the cause of a request's context when the client hung up.
var errClientGone = errors.New("lean server: the client closed the connection")

// arm lets the watch start once the request has run for HangupAfter:
// when it has no body, or its body was read to the end (possibly by
// another goroutine: a transport that sends it on). After the request's
// end (stopWatch) it does nothing.
func (c *serverConn) arm() {
	c.mu.Lock()
	if !c.inRequest || c.watch != watchOff {
		c.mu.Unlock()
		return
	}
	c.watch = watchArmed
	c.mu.Unlock()
	c.timer.Reset(c.s.hangupAfter())
}

// watchConn runs in the timer's goroutine: it reads one byte from the
// connection while the request runs. The client going away (a reset)
// cancels the request's context, its half-close (EOF) does not; a byte (the next request, pipelined)
// is kept for the reader; a deadline (the request's end) ends it.
func (c *serverConn) watchConn() {
	c.mu.Lock()
	if c.watch != watchArmed {
		c.mu.Unlock()
		return
	}
	c.watch = watchReading
	// Under the lock, so that stopWatch's past deadline comes after it.
	_ = c.nc.SetReadDeadline(time.Time{})
	c.mu.Unlock()
	n, err := c.nc.Read(c.stash[:])
	c.mu.Lock()
	if n == 1 {
		c.stashed = true
	} else if err != nil && !c.interrupts && !isTimeoutErr(err) {
		// The client sends no more: the connection closes after the
		// answer. Only a failed read other than EOF (a reset) cancels
		// the request: a client that half-closed its side (EOF, RFC
		// 9112 §9.6) still reads the answer.
		c.hungUp = true
		if c.cancel != nil && err != io.EOF {
			c.cancel(errClientGone)
			if h := c.takeHook(); h != nil {
				defer h()
			}
		}
	}
	// Else a deadline: the request's end (interrupts), or one the handler
	// set (http.ResponseController); the watch ends either way.
	c.watch = watchFinished
	c.cond.Broadcast()
	c.mu.Unlock()
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// stopWatch ends the request's watch: a watch not started never starts,
// one reading is interrupted and awaited.
func (c *serverConn) stopWatch() {
	c.timer.Stop()
	c.mu.Lock()
	c.inRequest = false
	if c.watch == watchReading {
		c.interrupts = true
		_ = c.nc.SetReadDeadline(aLongTimeAgo)
		for c.watch == watchReading {
			c.cond.Wait()
		}
		c.interrupts = false
	}
	c.watch = watchOff
	c.mu.Unlock()
}
