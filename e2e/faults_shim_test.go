package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// The fault rows of a gateway process killed, or its state store paused,
// while the async shim's broker call is in flight (issue 28, items 4 and
// 5): the helpers their steps use.

// shimProcessBroker are the broker keys of the process rows: the shim
// after 300ms, and a hold after a lost call (hold_after_timeout, counted
// from the later of the restart and the call's end) long enough that the
// row's steps during it (a poll, a retry) take a fraction of it on a
// loaded machine; the broker finishes the lost call before the row's
// first checks, so the hold only has to outlast those steps.
const shimProcessBroker = `, orphan_mitigation: mitigate, hold_after_timeout: %s, emulate: {async_after: 300ms}`

// shimLongWait bounds the waits that span the lost call's time on Redis:
// the broker timeout (1s) and a minute, the challenge of the lost replica
// (20s), then the hold and an orphan tick.
const shimLongWait = 3 * time.Minute

// shimGates are the provisions the process rows hold at the broker, per
// world (a row runs in two at once).
var shimGates sync.Map // *faultEnv -> *gate

// shimProcess restarts the row's gateway process with the async shim, on
// its bolt file (redis false) or on a redis-server of its own, and makes
// the broker hold the next provision until releaseShim, serving it then
// even though the gateway that sent it is gone, as a broker does.
func shimProcess(redis bool) func(*testing.T, *faultEnv) {
	return func(t *testing.T, f *faultEnv) {
		t.Helper()
		f.proc.kill9(t) // nothing in flight: the process as the row needs it
		// On bolt the restart ends the lost call at once, and the poll and
		// the retry follow within the hold; on Redis they come while the
		// call is still in progress, and the hold only follows the verdict.
		f.proc.broker, f.proc.timeout = fmt.Sprintf(shimProcessBroker, "30s"), "1s"
		if redis {
			f.proc.broker = fmt.Sprintf(shimProcessBroker, "2s")
			f.redis = storetest.StartRedis(t)
			f.proc.state = fmt.Sprintf("{backend: redis, redis: {addrs: [%q]}}", f.redis.Addr)
		}
		f.proc.start(t)
		g := &gate{entered: make(chan struct{}), proceed: make(chan struct{})}
		shimGates.Store(f, g)
		t.Cleanup(func() { shimGates.Delete(f) })
		f.front.set(samplebroker.EndpointProvision, func(w http.ResponseWriter, r *http.Request) {
			close(g.entered)
			<-g.proceed
			f.front.next.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
		})
	}
}

// killDuringShim kills the gateway process while the broker holds the
// provision it answered 202 for, starts it again, then lets the broker
// finish the provision of the dead process (as in the reproduction: the
// broker completes it after the kill) and waits until it holds it.
func killDuringShim(t *testing.T, f *faultEnv) {
	t.Helper()
	g, _ := shimGates.Load(f)
	await(t, g.(*gate).entered, "the broker to receive the shimmed provision")
	killAndRestart(t, f)
	close(g.(*gate).proceed)
	waitFor(t, "the broker to finish the provision of the dead process", func() bool { return f.brokerHas("i") })
}

// undoneWhenHoldEnds waits until the gateway reported the operation lost
// (on Redis after the call's time and the challenge) and its undo, once
// the hold ended, deleted what the broker made.
func undoneWhenHoldEnds(t *testing.T, f *faultEnv) {
	t.Helper()
	cl := f.client(t, 0, 0)
	waitLong(t, "the poll to report the call lost", func() bool {
		_ = poll.send(cl, "i")
		x := f.platforms[0].last(t)
		return x.Status == http.StatusOK && strings.Contains(x.Body, "the gateway restarted during the broker call")
	})
	waitLong(t, "the undo to delete the instance", func() bool {
		o, err := f.orphans()
		return err == nil && len(o) == 0 && !f.brokerHas("i")
	})
}

// pauseDuringShim waits for the shim's 202, then freezes the redis-server
// (SIGSTOP) before the broker answers.
func pauseDuringShim(t *testing.T, f *faultEnv) {
	t.Helper()
	shimAnswered(t, f)
	f.redis.Pause()
	t.Cleanup(f.redis.Resume) // harmless when it runs
}

// resumeAfterShim resumes the paused store and waits for the outcome the
// replica kept to reach the store.
func resumeAfterShim(t *testing.T, f *faultEnv) {
	t.Helper()
	f.redis.Resume()
	shimSettled(t, f)
}

// brokerHas reports whether the sample broker holds instance id, live or
// being created (its Holdings: no request, so the broker's counts stay
// the platform's and the gateway's).
func (f *faultEnv) brokerHas(id string) bool {
	return slices.Contains(f.broker.Holdings().Instances, id)
}

// waitLong waits until cond holds, failing the test after shimLongWait.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(shimLongWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", shimLongWait, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
