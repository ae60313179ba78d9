package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// Regression tests of issue 28, items 1–3: a platform that half-closes its
// side of the connection after its request (RFC 9112 §9.6) is served as
// any other, on both servers, for calls answered at once and for calls
// slower than the lean server's HangupAfter (10 ms).

// halfCloseWorlds are the servers and speeds each test runs on.
var halfCloseWorlds = []struct {
	server string
	slow   bool
}{
	{config.ServerLean, false}, {config.ServerLean, true},
	{config.ServerStandard, false}, {config.ServerStandard, true},
}

func worldName(server string, slow bool) string {
	if slow {
		return server + "/slow"
	}
	return server + "/fast"
}

// halfClosed sends a half-closed raw call to f's replica 0; slow, the
// broker holds it past HangupAfter (pastHangupAfter) first.
func halfClosed(t *testing.T, f *faultEnv, endpoint, method, path, body string, slow bool) (int, string) {
	t.Helper()
	type answer struct {
		status int
		body   string
		err    error
	}
	var g *gate
	if slow {
		g = f.front.hold(endpoint)
	}
	done := make(chan answer, 1)
	go func() {
		s, b, err := rawCall(f.urls[0]+"/t/b", method, path, body, halfClose)
		done <- answer{s, b, err}
	}()
	if slow {
		await(t, g.entered, "the broker to receive the call")
		pastHangupAfter(t, f)
		close(g.proceed)
	}
	a := awaitValue(t, done, "the half-closed call's answer")
	if a.err != nil {
		t.Fatalf("%s %s: %v", method, path, a.err)
	}
	return a.status, a.body
}

// TestHalfClosedProvisionIsNotUndone: the 201 a half-closed platform
// read is never taken for one nobody got: no orphan, and the mitigation
// deletes nothing.
func TestHalfClosedProvisionIsNotUndone(t *testing.T) {
	for _, w := range halfCloseWorlds {
		t.Run(worldName(w.server, w.slow), func(t *testing.T) {
			t.Parallel()
			f := newFaultEnv(t, memoryEnv, faultOptions{server: w.server})
			status, body := halfClosed(t, f, samplebroker.EndpointProvision, http.MethodPut, instancePath("halfclose1"), provisionBody, w.slow)
			if status != http.StatusCreated {
				t.Fatalf("provision: %d %s, want 201", status, body)
			}
			waitFor(t, "the gateway to finish the provision", func() bool { return len(f.platforms[0].exchanges()) == 1 })
			f.check(t, "after the half-closed provision", state{calls: calls{"provision": 1}})
			f.clock.Advance(time.Hour)
			if undo := f.mitigate(); len(undo) != 0 {
				t.Errorf("the mitigation sent DELETEs answered %v, want none", undo)
			}
			f.check(t, "after the mitigation", state{calls: calls{"provision": 1}})
		})
	}
}

// TestHalfClosedPollNeverGetsAnEmpty200: a half-closed last_operation
// gets the broker's answer, never a 200 the gateway made up.
func TestHalfClosedPollNeverGetsAnEmpty200(t *testing.T) {
	for _, w := range halfCloseWorlds {
		t.Run(worldName(w.server, w.slow), func(t *testing.T) {
			t.Parallel()
			f := newFaultEnv(t, memoryEnv, faultOptions{server: w.server})
			if got := f.send(t, provisionAsync, 0, "i", 0, nil); got != (saw{202, ""}) {
				t.Fatalf("async provision: %+v, want 202", got)
			}
			status, body := halfClosed(t, f, samplebroker.EndpointInstanceLastOperation, http.MethodGet, pollPath("i"), "", w.slow)
			if status != http.StatusOK || !strings.Contains(body, `"state"`) {
				t.Fatalf("poll: %d %q, want the broker's 200 with its state", status, body)
			}
			if diff := cmp.Diff(calls{"provision": 1, "instance_last_operation": 1}, f.calls()); diff != "" {
				t.Errorf("broker requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHalfClosedPutIsNot500: half-closed provisions are served, none
// answered 5xx for a context the half-close canceled (net/http cancels
// the request's on EOF).
func TestHalfClosedPutIsNot500(t *testing.T) {
	const n = 12
	for _, w := range halfCloseWorlds {
		if w.slow {
			continue // the acquire races the half-close at once or never
		}
		t.Run(w.server, func(t *testing.T) {
			t.Parallel()
			f := newFaultEnv(t, memoryEnv, faultOptions{server: w.server})
			for i := range n {
				id := fmt.Sprintf("halfclose%d", i)
				status, body := halfClosed(t, f, samplebroker.EndpointProvision, http.MethodPut, instancePath(id), provisionBody, false)
				if status != http.StatusCreated {
					t.Errorf("provision %s: %d %s, want 201", id, status, body)
				}
			}
			waitFor(t, "the gateway to finish the provisions", func() bool { return len(f.platforms[0].exchanges()) == n })
			f.check(t, "after the half-closed provisions", state{calls: calls{"provision": n}})
		})
	}
}
