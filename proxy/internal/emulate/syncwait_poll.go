package emulate

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// The waits between the polls of an operation the gateway waits for on a
// platform's behalf (emulate.sync_within). The broker's Retry-After (on the
// 202 or a poll answer) sets the next wait, within syncPollMin and the cap;
// without one, the wait starts at syncPollFirst and doubles.
const (
	SyncPollFirst = 500 * time.Millisecond
	SyncPollMin   = 100 * time.Millisecond
	// syncPollMax caps a wait while the platform waits, so that a long
	// Retry-After does not spend the whole bound on one wait.
	SyncPollMax = 10 * time.Second
	// carryOnPollMax caps a wait after the bound (carryOn), when no
	// platform waits: Cloud Controller's default polling interval.
	carryOnPollMax = time.Minute
)

// NextWait is the wait before the next poll: the broker's Retry-After
// when it sent one (ra > 0), else twice the last wait (syncPollFirst at
// first), within syncPollMin and limit.
func NextWait(last, ra, limit time.Duration) time.Duration {
	d := ra
	switch {
	case ra > 0:
	case last <= 0:
		d = SyncPollFirst
	default:
		d = 2 * last
	}
	return min(max(d, SyncPollMin), limit)
}

// RetryAfter reads a Retry-After header, in seconds or an HTTP-date
// (relative to now); 0 when there is none or it cannot be read.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := core.HeaderValue(h, "Retry-After")
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 || secs > int64(24*time.Hour/time.Second) {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// repeatCall is the platform's call as the gateway repeats it.
func (sw *syncWait) repeatCall() rules.Call {
	c := sw.call
	c.AcceptsIncomplete = true
	return c
}

// send makes one of the gateway's own broker calls for the platform's call
// (as upstream.ownCall: metered and traced), within the broker's timeout
// and the time left until until on the guard's clock.
func (sw *syncWait) send(ctx context.Context, ep rules.Endpoint, method string, u *url.URL, body []byte, until time.Time) (*http.Response, error) {
	left := until.Sub(sw.g.Now())
	if left <= 0 {
		return nil, context.DeadlineExceeded
	}
	ctx, cancel := context.WithTimeout(sw.u.OwnCall(ctx, ep, sw.traceParent), min(sw.u.Timeout, left))
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header = sw.out.Header.Clone() // credentials, version, request and originating identity
	req.Header.Del("Accept-Encoding")  // the transport's own, decoded for the gateway
	if body != nil {
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	} else {
		req.Header.Del("Content-Type")
		req.Header.Del("Content-Length")
	}
	res, err := sw.u.RT.RoundTrip(req)
	if err != nil {
		cancel()
		return nil, err
	}
	res.Body = &cancelBody{ReadCloser: res.Body, cancel: cancel}
	return res, nil
}

// cancelBody releases a call's context once its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// repeat sends the platform's call again with accepts_incomplete=true:
// the same body and headers.
func (sw *syncWait) repeat(ctx context.Context, until time.Time) (*http.Response, error) {
	u := *sw.out.URL
	q := u.Query()
	q.Set("accepts_incomplete", "true")
	u.RawQuery = q.Encode()
	body := sw.body
	if body == nil && sw.out.ContentLength != 0 {
		body = []byte{}
	}
	return sw.send(ctx, sw.call.Endpoint, sw.out.Method, &u, body, until)
}

// pollURL is the operation's last_operation URL.
func (sw *syncWait) pollURL() *url.URL {
	u := *sw.out.URL
	u.Path += "/last_operation"
	if u.RawPath != "" {
		u.RawPath += "/last_operation"
	}
	q := url.Values{}
	if sw.serviceID != "" {
		q.Set("service_id", sw.serviceID)
	}
	if sw.planID != "" {
		q.Set("plan_id", sw.planID)
	}
	if sw.operation != "" {
		q.Set("operation", sw.operation)
	}
	u.RawQuery = q.Encode()
	return &u
}

// pollOnce asks the broker for the operation's state. An error, or an
// answer that ends nothing, leaves it in progress.
func (sw *syncWait) pollOnce(ctx context.Context, until time.Time) (rules.Answer, time.Duration) {
	res, err := sw.send(ctx, sw.w.Poll, http.MethodGet, sw.pollURL(), nil, until)
	if err != nil {
		sw.u.Log.LogAttrs(ctx, slog.LevelWarn, "polling the operation the gateway waits for failed; polling on",
			slog.String("broker", sw.u.Name), slog.String("instance_id", sw.call.InstanceID),
			slog.String("binding_id", sw.call.BindingID), slog.String("error", sw.u.Failed(err).Error()))
		return rules.Answer{}, 0
	}
	body, err := upstream.ReadOwn(res)
	if err != nil {
		body = nil
	}
	poll := rules.Call{Endpoint: sw.w.Poll, InstanceID: sw.call.InstanceID, BindingID: sw.call.BindingID}
	return rules.ReadResponse(poll, res.StatusCode, body), RetryAfter(res.Header, sw.g.Now())
}

// poll polls the operation, first after ra (the 202's Retry-After, 0 for
// none), until it ends or until passes on the guard's clock. It returns the
// answer that ended it, the last wait, and whether it ended.
func (sw *syncWait) poll(ctx context.Context, until time.Time, ra time.Duration) (rules.Answer, time.Duration, bool) {
	var wait time.Duration
	for {
		wait = NextWait(wait, ra, SyncPollMax)
		left := until.Sub(sw.g.Now())
		if left <= 0 || sw.u.Wait(ctx, min(wait, left)) != nil || !sw.g.Now().Before(until) {
			return rules.Answer{}, wait, false
		}
		var a rules.Answer
		a, ra = sw.pollOnce(ctx, until)
		if a.Ends(sw.call.Endpoint) {
			return a, wait, true
		}
	}
}

// fetchBinding reads the binding the broker finished: its GET binding
// answer's body, for the bind's synchronous answer.
func (sw *syncWait) fetchBinding(ctx context.Context, until time.Time) ([]byte, error) {
	u := *sw.out.URL
	u.RawQuery = ""
	// Within the bound too: past it the answer could not be written
	// (listen.write_timeout).
	res, err := sw.send(ctx, rules.GetBinding, http.MethodGet, &u, nil, until)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, errors.New("emulate.sync_within passed before it answered")
	case err != nil:
		return nil, sw.u.Failed(err)
	}
	body, err := upstream.ReadOwn(res)
	switch {
	case err != nil:
		return nil, &upstream.Withheld{Said: "its answer could not be read" + upstream.CutReason(err), Err: err}
	case res.StatusCode != http.StatusOK:
		return nil, errors.New("it answered " + strconv.Itoa(res.StatusCode))
	}
	return body, nil
}

// carryOn polls on, after the platform got its 504, until the operation
// ends, the lock is no longer the call's (a platform's last_operation
// poll ended it, an operator released it, or it expired), the lock's
// deadline passes, or the gateway stops. When the operation ends it makes
// the orphan recorded at the bound due at once, then releases the lock;
// otherwise the orphan stays due at the lock's deadline.
func (sw *syncWait) carryOn(wait time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := sw.g.Retry.Stop
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var ra time.Duration
	for {
		wait = NextWait(wait, ra, carryOnPollMax)
		left := sw.lock.Deadline.Sub(sw.g.Now())
		if left <= 0 || sw.u.Wait(ctx, min(wait, left)) != nil || !sw.stillHeld(ctx) {
			return
		}
		var a rules.Answer
		a, ra = sw.pollOnce(ctx, sw.lock.Deadline)
		if a.Ends(sw.call.Endpoint) {
			sw.ended(ctx, a)
			return
		}
	}
}

// stillHeld reports whether the call's lock is still held by the call.
func (sw *syncWait) stillHeld(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, guard.ReleaseTimeout)
	defer cancel()
	l, err := sw.g.St.Get(ctx, sw.lock.Key)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	return err != nil || l.Owner == sw.lock.Owner // a store that does not answer ends nothing
}

// ended settles the lock of an operation that ended after the bound.
func (sw *syncWait) ended(ctx context.Context, a rules.Answer) {
	ctx, cancel := context.WithTimeout(ctx, guard.ReleaseTimeout)
	defer cancel()
	sw.u.Log.LogAttrs(ctx, slog.LevelInfo, "the operation the platform stopped waiting for ended; lock released",
		slog.String("broker", sw.u.Name), slog.String("endpoint", sw.call.Endpoint.String()),
		slog.String("instance_id", sw.call.InstanceID), slog.String("binding_id", sw.call.BindingID),
		slog.String("state", a.State), slog.String("orphan", sw.orphanID))
	// The orphan is written under the call's lock only, as every orphan
	// is, so that no success of a platform call, which needs the lock, can
	// have cancelled it in between.
	if sw.orphanID != "" && sw.stillHeld(ctx) && !sw.g.DueHeldOrphan(ctx, sw.orphanID, sw.lock) {
		return // the orphan stays due at the lock's deadline, which ends the lock too
	}
	sw.g.Release(ctx, sw.lock)
}
