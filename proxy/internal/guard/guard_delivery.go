package guard

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// A provision's or bind's success leaves an orphan when the platform does
// not get it. Whether it did is known only by writing it: a platform that
// half-closed its side of the connection (RFC 9112 §9.6) still reads, and
// a first write to a platform that closed with a FIN succeeds. So the
// guard settles such a call (settleCall) but for its lock, which it holds
// until the answer is written (a 202's as its async operation already);
// then delivered releases it, or notes the orphan first. A retry of the
// platform's meanwhile is refused as in progress, so none can succeed and
// then be undone.
//
// The answer's last byte is held back until then (lastByteHeld): the
// platform cannot have read the whole answer before the lock is released,
// so its next call sees the lock gone, as it sees every other settlement.

// whyGone is why an orphan candidate is noted for a success the
// platform did not get because it went away.
const whyGone = "the platform went away before the answer reached it"

// delivered settles a success whose receipt decides its orphan (see
// settleCall), once its answer was written: flushed to a platform still
// there, it ends the lock as any other; a failed write, or a platform
// gone (a reset, not a half-close), makes it an orphan candidate, and
// the record of what it created is dropped, before the lock is released
// (a 202's, the async operation, is kept).
func (g *Guard) delivered(w http.ResponseWriter, s *core.Scope) {
	h := s.Lock
	h.Delivering = false
	err := http.NewResponseController(w).Flush()
	if errors.Is(err, http.ErrNotSupported) {
		err = nil // a writer that cannot tell: as before any write failed
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	defer cancel()
	if err == nil && h.Platform.Err() == nil {
		if h.Record != nil { // the record first, then the lock
			g.Retry.Add(Pending{Lock: h.Lock, Record: h.Record, Keep: h.Status == http.StatusAccepted})
			return
		}
		if h.Status != http.StatusAccepted { // a 202's lock is its async operation already
			g.Release(ctx, h.Lock)
		}
		return
	}
	if h.Status != http.StatusOK && g.Inv.Keeps(upstream.Of(s.Route)) { // 201 or 202: this call made it
		g.Inv.failed(ctx, upstream.Of(s.Route).Name, s.Call, g.Inv.Removed(ctx, upstream.Of(s.Route).Name, s.Call.InstanceID, s.Call.BindingID, store.LastOperation{}))
	}
	// A 202's lock is the async operation the broker works on, whether or
	// not the platform heard of it: it stays, so that nothing else reaches
	// the broker on the instance meanwhile (the failover campaign's "202
	// not delivered": a deprovision reached the broker during the async
	// provision); the orphan waits for it, which the watch or the
	// reconciler ends.
	accepted := h.Status == http.StatusAccepted
	_, why := rules.OrphanUnseen(s.Call, h.Status, whyGone)
	if o, ok := g.NoteOrphan(ctx, s, why, g.Now(), "", time.Time{}); !ok {
		g.Retry.Add(Pending{Lock: h.Lock, PutOrphan: &o, Keep: accepted})
		return
	}
	if !accepted {
		g.Release(ctx, h.Lock)
	}
}

// holdLastByte puts a reader over res's body, of which body holds the
// bytes, that gives all but the last byte, then settles the delivery of
// s's call (delivered, over what was written so far), then the last
// byte. Nothing when s's call does not wait for its delivery, or its body
// is empty (finish settles it after the write).
func (g *Guard) holdLastByte(res *http.Response, s *core.Scope, body []byte) {
	if s.Lock == nil || !s.Lock.Delivering || len(body) == 0 {
		return
	}
	res.Body = &lastByteHeld{ReadCloser: res.Body, before: len(body) - 1, g: g, s: s}
}

// lastByteHeld is a body that gives its last byte only once the guard
// settled the delivery of what came before (see holdLastByte).
type lastByteHeld struct {
	io.ReadCloser
	before int // bytes left before the last
	g      *Guard
	s      *core.Scope
}

func (b *lastByteHeld) Read(p []byte) (int, error) {
	if b.before > 0 {
		p = p[:min(len(p), b.before)]
		n, err := b.ReadCloser.Read(p)
		b.before -= n
		return n, err
	}
	if h := b.s.Lock; h.Delivering {
		b.g.delivered(&b.s.W, b.s)
	}
	return b.ReadCloser.Read(p)
}
