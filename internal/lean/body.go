package lean

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
)

// body is an answer's body: it pools the connection once read to its end,
// and closes it when closed early or on an error.
type body struct {
	t     *Transport
	c     *conn
	key   poolKey
	rc    io.ReadCloser // http.ReadResponse's body, never closed (it would drain); nil: fixed's
	fixed fixedBody     // readResponse's body
	ctx   context.Context
	stop  callWatch // ends the call's watch
	keep  bool      // neither side asked to close the connection

	mu   sync.Mutex
	done bool  // the connection was pooled or closed
	err  error // what Read returns once done
}

var errBodyClosed = errors.New("lean: read on closed response body")

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.done {
		err := b.err
		b.mu.Unlock()
		return 0, err
	}
	b.mu.Unlock()
	var n int
	var err error
	if b.rc != nil {
		n, err = b.rc.Read(p)
	} else {
		n, err = b.fixed.Read(p)
	}
	if err == nil {
		return n, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done { // closed while reading
		return n, b.err
	}
	b.done = true
	if err == io.EOF {
		b.err = io.EOF
		b.t.release(b.key, b.c, b.stop, b.keep)
		return n, io.EOF
	}
	b.stop.stop()
	b.c.close()
	b.err = callError(b.ctx, "reading the answer's body", err)
	return n, b.err
}

// Close closes the connection unless the body was read to its end.
func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return nil
	}
	b.done, b.err = true, errBodyClosed
	b.stop.stop()
	b.c.close()
	return nil
}

// switched is the body of a 101 Switching Protocols answer: the connection
// itself, what br holds first.
type switched struct {
	br   *bufio.Reader
	conn net.Conn
}

func (s *switched) Read(p []byte) (int, error) {
	if s.br != nil {
		if n := s.br.Buffered(); n > 0 {
			return s.br.Read(p[:min(len(p), n)])
		}
		s.br = nil
	}
	return s.conn.Read(p)
}

func (s *switched) Write(p []byte) (int, error) { return s.conn.Write(p) }
func (s *switched) Close() error                { return s.conn.Close() }
