package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// Platforms on raw sockets: one that half-closes its side after the
// request (shutdown(SHUT_WR), RFC 9112 §9.6) and reads the answer, and one
// that hangs up while the broker works, with a FIN or with a reset.

// routed is the platform's OSB client with the route's base URL, which
// the raw-socket calls send to.
type routed struct {
	osb.Client
	base string
}

// baseOf is the route's base URL of the client a call is made with.
func baseOf(c osb.Client) string { return c.(routed).base }

// How a raw-socket platform ends its side once the request is sent.
type ending int

const (
	halfClose ending = iota // CloseWrite at once, then read the answer
	hangUpFIN               // close (a FIN) when hangUp tells it, reading nothing
	hangUpRST               // close with SO_LINGER 0 (a reset) when hangUp tells it
)

// hangUps maps a route's base URL to the channel of its raw platform
// waiting to hang up: hangUp sends it a channel, which it closes once
// its connection is closed.
var hangUps sync.Map

// rawCall sends method path (under base) with body on a connection of its
// own, ends its side as end says, and reads the answer: its status and
// body, or an error when none came (a hang-up reads nothing).
func rawCall(base, method, path, body string, end ending) (int, string, error) {
	u, err := url.Parse(base + path)
	if err != nil {
		return 0, "", err
	}
	var tell chan chan struct{}
	if end != halfClose {
		tell = make(chan chan struct{})
		hangUps.Store(base, tell)
		defer hangUps.Delete(base)
	}
	c, err := net.DialTimeout("tcp", u.Host, settleTimeout)
	if err != nil {
		return 0, "", err
	}
	conn := c.(*net.TCPConn)
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(settleTimeout))
	auth := base64.StdEncoding.EncodeToString([]byte("platform-user:platform-pass"))
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Basic %s\r\nX-Broker-API-Version: 2.14\r\n", method, u.RequestURI(), u.Host, auth)
	if body != "" {
		req += fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	if _, err := io.WriteString(conn, req+"\r\n"+body); err != nil {
		return 0, "", err
	}
	switch end {
	case halfClose:
		if err := conn.CloseWrite(); err != nil {
			return 0, "", err
		}
	case hangUpFIN, hangUpRST:
		select {
		case done := <-tell:
			if end == hangUpRST {
				_ = conn.SetLinger(0)
			}
			conn.Close()
			close(done)
			return 0, "", fmt.Errorf("the platform hung up (%s)", map[ending]string{hangUpFIN: "FIN", hangUpRST: "reset"}[end])
		case <-time.After(settleTimeout):
			return 0, "", errors.New("nobody told the platform to hang up")
		}
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: method})
	if err != nil {
		return 0, "", fmt.Errorf("no answer: %w", err)
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, string(b), fmt.Errorf("the answer's body: %w", err)
	}
	return res.StatusCode, string(b), nil
}

// rawSend is rawCall as a platformCall's send: nil for a 2xx, the OSB
// client's error for another status.
func rawSend(base, method, path, body string, end ending) error {
	status, b, err := rawCall(base, method, path, body, end)
	if err != nil || status/100 == 2 {
		return err
	}
	var e struct{ Description *string }
	_ = json.Unmarshal([]byte(b), &e)
	return osb.HTTPStatusCodeError{StatusCode: status, Description: e.Description}
}

// Raw-socket bodies and paths of the sample broker's calls.
var (
	provisionBody = fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":%q,"space_guid":%q}`,
		samplebroker.ServiceID, samplebroker.PlanSyncID, orgGUID, spaceGUID)
	bindBody = fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, samplebroker.ServiceID, samplebroker.PlanSyncID)
)

func instancePath(id string) string { return "/v2/service_instances/" + id }

func pollPath(id string) string {
	return instancePath(id) + "/last_operation?" + url.Values{"service_id": {serviceID}, "plan_id": {asyncPlan}}.Encode()
}

// rawProvision is a provision of a raw-socket platform that ends its side
// as end says.
func rawProvision(name string, end ending) platformCall {
	return platformCall{name, samplebroker.EndpointProvision, func(c osb.Client, id string) error {
		return rawSend(baseOf(c), http.MethodPut, instancePath(id), provisionBody, end)
	}}
}

var (
	halfClosedProvision = rawProvision("half-closed provision", halfClose)
	hangUpFINProvision  = rawProvision("provision, the platform hanging up with a FIN", hangUpFIN)
	hangUpRSTProvision  = rawProvision("provision, the platform hanging up with a reset", hangUpRST)
	halfClosedBind      = platformCall{"half-closed bind", samplebroker.EndpointBind, func(c osb.Client, id string) error {
		return rawSend(baseOf(c), http.MethodPut, instancePath(id)+"/service_bindings/k", bindBody, halfClose)
	}}
	halfClosedPoll = platformCall{"half-closed last_operation", samplebroker.EndpointInstanceLastOperation, func(c osb.Client, id string) error {
		return rawSend(baseOf(c), http.MethodGet, pollPath(id), "", halfClose)
	}}
)

// hangUp makes the raw platform of replica 0 hang up (while the broker
// holds its call) and waits until its connection is closed.
func hangUp(t *testing.T, f *faultEnv) {
	t.Helper()
	base := f.urls[0] + "/t/b"
	var tell chan chan struct{}
	waitFor(t, "the raw platform to wait for its hang-up", func() bool {
		v, ok := hangUps.Load(base)
		if ok {
			tell = v.(chan chan struct{})
		}
		return ok
	})
	done := make(chan struct{})
	tell <- done
	await(t, done, "the raw platform's close")
}

// resetAndGone makes the raw platform reset its connection and waits
// until the gateway sees it gone (its request's context ends).
func resetAndGone(t *testing.T, f *faultEnv) {
	t.Helper()
	hangUp(t, f)
	platformGone(t, f)
}

// pastHangupAfter holds the broker's answer for 50 ms of real time, past
// the lean server's HangupAfter (10 ms), so that its watch (and net/http's
// background read) read the half-close before the answer is written. Not
// a synchronisation: the row's outcome must be the same either way.
func pastHangupAfter(*testing.T, *faultEnv) { time.Sleep(50 * time.Millisecond) }
