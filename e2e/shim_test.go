package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"code.cloudfoundry.org/brokerapi/v13"
	"code.cloudfoundry.org/brokerapi/v13/domain"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// shimYAML puts one synchronous broker behind the gateway with the async
// shim on: ${NAME} at ${URL}.
const shimYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
inventory:
  key_file: ${KEY_FILE}
brokers:
  - name: slow
    url: ${URL}
    username: ${USER}
    password: ${PASS}
    api_version: {min: "2.14", max: "2.17"}
    timeout: 20s
    inventory:
      secrets: encrypted
    emulate:
      async_after: 100ms
tenants:
  - name: cf-prod
    credentials: [{username: cf-prod-user, password: cf-prod-pass}]
    routes: [{broker: slow}]
`

// shimGateway serves a gateway for shimYAML before the broker at url with
// the timers timer (nil: real ones) and returns the OSB client of its
// platform, alpha features (async bindings, GET binding) on.
func shimGateway(t *testing.T, url, user, pass string, timer proxy.Timer) osb.Client {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "inventory.keys")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"URL": url, "USER": user, "PASS": pass, "KEY_FILE": keyFile}
	cfg, err := config.Parse([]byte(shimYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Timer: timer, BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	c, err := osb.NewClient(&osb.ClientConfiguration{Name: "cf-prod", URL: serveGateway(t, g) + "/cf-prod/slow", APIVersion: osb.LatestAPIVersion(),
		EnableAlphaFeatures: true, TimeoutSeconds: 30,
		AuthConfig: &osb.AuthConfig{BasicAuthConfig: &osb.BasicAuthConfig{Username: prodUser, Password: prodPass}}})
	if err != nil {
		t.Fatalf("osb.NewClient: %v", err)
	}
	return c
}

// shimCase is one slow synchronous broker behind the shim: before each
// broker call, slowDown makes the next call to the endpoint (a sample
// broker endpoint name) slow and returns what the test does once the call
// is at the broker (fire the gateway's timer) and what lets it answer
// (nil: it answers by itself, later).
type shimCase struct {
	serviceID, plan string
	client          osb.Client
	slowDown        func(t *testing.T, endpoint string) (atBroker func(), wake func())
}

// TestShimSlowBrokers: the Kubernetes OSB client walks a synchronous broker
// that takes longer than async_after through provision, bind, GET binding,
// unbind and deprovision, each asynchronous through the gateway: a 202 with
// the gateway's operation, polls "in progress" while the broker works, then
// "succeeded", and the bind's credentials from GET binding. The brokers: the
// sample broker with its latency fault, and a brokerapi v13 broker that
// sleeps in every call until the test wakes it.
func TestShimSlowBrokers(t *testing.T) {
	t.Run("sample broker latency", func(t *testing.T) {
		t.Parallel()
		// The broker's latency ends when the test says (Options.After),
		// never by a timer racing the test's steps.
		latencies := make(chan chan time.Time, 4)
		sb := samplebroker.New(samplebroker.Options{Username: sampleUser, Password: samplePass,
			After: func(time.Duration) <-chan time.Time {
				c := make(chan time.Time, 1)
				latencies <- c
				return c
			}})
		srv := httptest.NewServer(sb)
		t.Cleanup(srv.Close)
		timers := make(chan chan time.Time, 4)
		timer := func(time.Duration) (<-chan time.Time, func() bool) {
			c := make(chan time.Time, 1)
			timers <- c
			return c, func() bool { return true }
		}
		sc := shimCase{serviceID: samplebroker.ServiceID, plan: samplebroker.PlanSyncID,
			client: shimGateway(t, srv.URL, sampleUser, samplePass, timer)}
		sc.slowDown = func(t *testing.T, endpoint string) (func(), func()) {
			// The call waits out its latency at the broker; the gateway's
			// async_after fires once it is there; the latency ends after
			// the first poll.
			if err := sb.InjectFault(samplebroker.Fault{Endpoint: endpoint, Latency: time.Hour, Count: 1}); err != nil {
				t.Fatal(err)
			}
			var latency chan time.Time
			return func() {
					latency = awaitValue(t, latencies, "the call at the broker")
					awaitValue(t, timers, "the async_after timer") <- time.Time{}
				}, func() {
					latency <- time.Time{}
				}
		}
		sc.run(t)
	})
	t.Run("brokerapi broker that sleeps", func(t *testing.T) {
		t.Parallel()
		b := &sleepyBroker{apiBroker: newAPIBroker(time.Now, asyncDelay), asleep: make(chan chan struct{}, 1)}
		h := http.StripPrefix(apiBase, brokerapi.New(b, slog.New(slog.DiscardHandler), brokerapi.BrokerCredentials{Username: apiUser, Password: apiPass}))
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		sc := shimCase{serviceID: apiServiceID, plan: apiPlanSyncID, client: shimGateway(t, srv.URL+apiBase, apiUser, apiPass, nil)}
		sc.slowDown = func(*testing.T, string) (func(), func()) {
			wake := make(chan struct{})
			b.asleep <- wake
			return func() {}, func() { close(wake) }
		}
		sc.run(t)
	})
}

// run walks the lifecycle of one shimCase.
func (sc shimCase) run(t *testing.T) {
	const id, bindingID = "slow-instance", "slow-binding"
	c := sc.client
	plan := &sc.plan
	shimmed := func(what, endpoint string, call func() (bool, *osb.OperationKey, error), poll func(*osb.OperationKey) (*osb.LastOperationResponse, error)) {
		t.Helper()
		atBroker, wake := sc.slowDown(t, endpoint)
		type result struct {
			async bool
			op    *osb.OperationKey
			err   error
		}
		done := make(chan result, 1)
		go func() {
			async, op, err := call()
			done <- result{async, op, err}
		}()
		atBroker()
		res := awaitValue(t, done, what+"'s answer")
		if res.err != nil || !res.async || res.op == nil || !strings.HasPrefix(string(*res.op), proxy.ShimOperationPrefix) {
			t.Fatalf("%s: async %v, operation %v, error %v; want 202 with the gateway's operation", what, res.async, res.op, res.err)
		}
		last, err := poll(res.op)
		if err != nil || last.State != osb.StateInProgress {
			t.Fatalf("%s: first poll %+v, %v; want in progress", what, last, err)
		}
		if wake != nil {
			wake()
		}
		waitFor(t, what+" to succeed", func() bool {
			last, err = poll(res.op)
			return err != nil || last.State != osb.StateInProgress
		})
		if err != nil || last.State != osb.StateSucceeded {
			t.Fatalf("%s: last poll %+v, %v; want succeeded", what, last, err)
		}
	}

	shimmed("provision", samplebroker.EndpointProvision, func() (bool, *osb.OperationKey, error) {
		res, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, AcceptsIncomplete: true, ServiceID: sc.serviceID, PlanID: sc.plan,
			OrganizationGUID: orgGUID, SpaceGUID: spaceGUID, Context: cfContext})
		if err != nil {
			return false, nil, err
		}
		return res.Async, res.OperationKey, nil
	}, func(op *osb.OperationKey) (*osb.LastOperationResponse, error) {
		return c.PollLastOperation(&osb.LastOperationRequest{InstanceID: id, ServiceID: &sc.serviceID, PlanID: plan, OperationKey: op})
	})
	pollBinding := func(op *osb.OperationKey) (*osb.LastOperationResponse, error) {
		return c.PollBindingLastOperation(&osb.BindingLastOperationRequest{InstanceID: id, BindingID: bindingID,
			ServiceID: &sc.serviceID, PlanID: plan, OperationKey: op})
	}
	app := appGUID
	shimmed("bind", samplebroker.EndpointBind, func() (bool, *osb.OperationKey, error) {
		res, err := c.Bind(&osb.BindRequest{BindingID: bindingID, InstanceID: id, AcceptsIncomplete: true, ServiceID: sc.serviceID,
			PlanID: sc.plan, BindResource: &osb.BindResource{AppGUID: &app}, Context: cfContext})
		if err != nil {
			return false, nil, err
		}
		return res.Async, res.OperationKey, nil
	}, pollBinding)
	got, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: id, BindingID: bindingID})
	if err != nil || len(got.Credentials) == 0 {
		t.Fatalf("GetBinding after the shimmed bind: %+v, %v", got, err)
	}
	shimmed("unbind", samplebroker.EndpointUnbind, func() (bool, *osb.OperationKey, error) {
		res, err := c.Unbind(&osb.UnbindRequest{InstanceID: id, BindingID: bindingID, AcceptsIncomplete: true, ServiceID: sc.serviceID, PlanID: sc.plan})
		if err != nil {
			return false, nil, err
		}
		return res.Async, res.OperationKey, nil
	}, pollBinding)
	shimmed("deprovision", samplebroker.EndpointDeprovision, func() (bool, *osb.OperationKey, error) {
		res, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, AcceptsIncomplete: true, ServiceID: sc.serviceID, PlanID: sc.plan})
		if err != nil {
			return false, nil, err
		}
		return res.Async, res.OperationKey, nil
	}, func(op *osb.OperationKey) (*osb.LastOperationResponse, error) {
		return c.PollLastOperation(&osb.LastOperationRequest{InstanceID: id, ServiceID: &sc.serviceID, PlanID: plan, OperationKey: op})
	})
}

// sleepyBroker is the brokerapi broker of the lifecycle tests, answering
// synchronously, but slowly: each provision, update, deprovision, bind and
// unbind sleeps until the test wakes it (a channel it put in asleep before
// the call), or until its request is canceled.
type sleepyBroker struct {
	*apiBroker
	asleep chan chan struct{}
}

func (b *sleepyBroker) sleep(ctx context.Context) {
	select {
	case wake := <-b.asleep:
		select {
		case <-wake:
		case <-ctx.Done():
		}
	default: // nobody asked for this call to be slow
	}
}

func (b *sleepyBroker) Provision(ctx context.Context, id string, d domain.ProvisionDetails, _ bool) (domain.ProvisionedServiceSpec, error) {
	b.sleep(ctx)
	return b.apiBroker.Provision(ctx, id, d, false)
}

func (b *sleepyBroker) Update(ctx context.Context, id string, d domain.UpdateDetails, _ bool) (domain.UpdateServiceSpec, error) {
	b.sleep(ctx)
	return b.apiBroker.Update(ctx, id, d, false)
}

func (b *sleepyBroker) Deprovision(ctx context.Context, id string, d domain.DeprovisionDetails, _ bool) (domain.DeprovisionServiceSpec, error) {
	b.sleep(ctx)
	return b.apiBroker.Deprovision(ctx, id, d, false)
}

func (b *sleepyBroker) Bind(ctx context.Context, id, bindingID string, d domain.BindDetails, _ bool) (domain.Binding, error) {
	b.sleep(ctx)
	return b.apiBroker.Bind(ctx, id, bindingID, d, false)
}

func (b *sleepyBroker) Unbind(ctx context.Context, id, bindingID string, d domain.UnbindDetails, _ bool) (domain.UnbindSpec, error) {
	b.sleep(ctx)
	return b.apiBroker.Unbind(ctx, id, bindingID, d, false)
}
