// This file builds the in-process targets: the sample broker itself
// (direct), a bare tuned httputil.ReverseProxy, and the real gateway, each on
// its own loopback http.Server with the gateway's default server settings.

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// Target names, in the order they are run and reported.
const (
	targetDirect  = "direct"
	targetBare    = "bare proxy"
	targetGateway = "gateway"
	targetNginx   = "nginx"
)

// Credentials of the benchmark's broker and tenant.
const (
	brokerUser = "bench-broker"
	brokerPass = "bench-broker-secret"
	tenantUser = "bench-platform"
	tenantPass = "bench-platform-secret"
	tenantName = "bench"
	brokerName = "sample"
	apiVersion = "2.17"

	// instanceID is provisioned on the async plan before the runs, so its
	// last_operation stays "in progress" (with Retry-After) throughout.
	instanceID = "loadbench-instance-0001"
)

// target is one way to reach the sample broker.
type target struct {
	name   string
	base   string      // URL before "/v2/...", without a trailing slash
	header http.Header // what the platform sends: credentials and version
	// extraCPU returns CPU time used outside this process, or is nil.
	extraCPU func() (time.Duration, error)
	close    func()
}

// url returns the absolute URL of path ("/v2/...") at t.
func (t *target) url(path string) string { return t.base + path }

// env is the benchmark's world: the broker and every target in front of it.
type env struct {
	broker    *target // direct
	targets   []*target
	operation string // the operation string of instanceID's provision
	closers   []func()
}

// close stops every server and process env started, last first.
func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// basic returns the value of a basic-auth Authorization header.
func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// platformHeader is what a platform sends through a proxy: the tenant's
// credentials, which every proxy replaces with the broker's.
func platformHeader() http.Header {
	return http.Header{
		"Authorization": {basic(tenantUser, tenantPass)},
		versionHeader:   {apiVersion},
	}
}

// serverSettings are the platform-facing server settings the gateway uses
// by default; every in-process server gets them, so only handlers differ.
var serverSettings = func() config.Listen {
	var c config.Config
	c.ApplyDefaults()
	return c.Listen
}()

// serve serves h on a fresh loopback port and returns its base URL and a
// function that stops it. The server's goroutines, and so the handler's,
// carry the pprof label role=<role>.
func serve(role string, h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	l := serverSettings
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn),
	}
	var wg sync.WaitGroup
	pprof.Do(context.Background(), pprof.Labels("role", role), func(context.Context) {
		wg.Go(func() { _ = srv.Serve(ln) })
	})
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		wg.Wait()
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// newEnv starts the sample broker, provisions instanceID, and starts the
// bare proxy and the gateway in front of the broker. nginx is added by the
// caller when wanted.
func newEnv() (*env, error) {
	e := &env{}
	ok := false
	defer func() {
		if !ok {
			e.close()
		}
	}()
	b := samplebroker.New(samplebroker.Options{
		Username: brokerUser, Password: brokerPass,
		AsyncDelay: 24 * time.Hour, // in progress for the whole benchmark
	})
	base, stop, err := serve("broker", b)
	if err != nil {
		return nil, fmt.Errorf("sample broker: %w", err)
	}
	e.closers = append(e.closers, stop)
	e.broker = &target{name: targetDirect, base: base, header: http.Header{
		"Authorization": {basic(brokerUser, brokerPass)},
		versionHeader:   {apiVersion},
	}}
	if e.operation, err = provision(e.broker); err != nil {
		return nil, err
	}
	e.targets = append(e.targets, e.broker)

	for _, mk := range []func(brokerURL string) (*target, error){newBare, newGateway} {
		t, err := mk(base)
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, t.close)
		e.targets = append(e.targets, t)
	}
	ok = true
	return e, nil
}

// provision creates instanceID on the async plan and returns the operation
// string to poll.
func provision(broker *target) (string, error) {
	body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org-1","space_guid":"space-1",`+
		`"context":{"platform":"cloudfoundry","organization_guid":"org-1","space_guid":"space-1"}}`,
		samplebroker.ServiceID, samplebroker.PlanAsyncID)
	req, err := http.NewRequest(http.MethodPut,
		broker.url("/v2/service_instances/"+instanceID+"?accepts_incomplete=true"), strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header = broker.header.Clone()
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("provision: %w", err)
	}
	defer res.Body.Close()
	var out struct {
		Operation string `json:"operation"`
	}
	if err := decodeJSON(res, http.StatusAccepted, &out); err != nil {
		return "", fmt.Errorf("provision: %w", err)
	}
	return out.Operation, nil
}

// newBare returns the floor any Go proxy pays: an httputil.ReverseProxy
// whose Rewrite sets the broker's URL and credentials, with a transport
// whose idle pool holds every connection, and a buffer pool.
func newBare(brokerURL string) (*target, error) {
	u, err := url.Parse(brokerURL)
	if err != nil {
		return nil, err
	}
	auth := []string{basic(brokerUser, brokerPass)}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        maxConnsPerTarget,
		MaxIdleConnsPerHost: maxConnsPerTarget,
		IdleConnTimeout:     90 * time.Second,
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Header["Authorization"] = auth
		},
		Transport:  tr,
		BufferPool: newBufferPool(),
		ErrorLog:   slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn),
	}
	base, stop, err := serve("bare", rp)
	if err != nil {
		return nil, fmt.Errorf("bare proxy: %w", err)
	}
	return &target{name: targetBare, base: base, header: platformHeader(),
		close: func() { stop(); tr.CloseIdleConnections() }}, nil
}

// maxConnsPerTarget sizes the proxies' idle pools: more than the highest
// connection count the benchmark is meant for.
const maxConnsPerTarget = 256

// gatewayYAML is a realistic configuration: one tenant with basic auth, one
// broker with credentials, JSON access logs at info level.
const gatewayYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
log: {format: json, level: info}
brokers:
  - name: ` + brokerName + `
    url: ${BROKER_URL}
    username: ` + brokerUser + `
    password: ${BROKER_PASSWORD}
    api_version: {min: "2.13", max: "2.17"}
    timeout: 30s
tenants:
  - name: ` + tenantName + `
    credentials:
      - username: ` + tenantUser + `
        password: ${TENANT_PASSWORD}
    routes:
      - broker: ` + brokerName + `
`

// newGateway returns the real gateway (proxy.New) in front of the broker,
// logging access lines as JSON to io.Discard, as in production.
func newGateway(brokerURL string) (*target, error) {
	vars := map[string]string{"BROKER_URL": brokerURL, "BROKER_PASSWORD": brokerPass, "TENANT_PASSWORD": tenantPass}
	cfg, err := config.Parse([]byte(gatewayYAML), config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}})
	if err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// The access log as osb-gateway serve writes it (JSON), to io.Discard.
	g, err := proxy.New(cfg, proxy.Options{Logger: log, AccessLog: proxy.NewAccessLog(io.Discard, "json", slog.LevelInfo)})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	base, stop, err := serve("gateway", g)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return &target{name: targetGateway, base: base + "/" + tenantName + "/" + brokerName,
		header: platformHeader(), close: func() { stop(); g.Close(nil) }}, nil
}

// requestPath returns the path ("/v2/...") of a request kind.
func (e *env) requestPath(kind string) (string, error) {
	switch kind {
	case kindCatalog:
		return "/v2/catalog", nil
	case kindLastOperation:
		q := url.Values{"service_id": {samplebroker.ServiceID}, "plan_id": {samplebroker.PlanAsyncID},
			"operation": {e.operation}}
		return "/v2/service_instances/" + instanceID + "/last_operation?" + q.Encode(), nil
	}
	return "", fmt.Errorf("unknown request kind %q (want %s or %s)", kind, kindCatalog, kindLastOperation)
}

// check sends each kind of request once to every target and requires 200,
// so a misconfigured target fails before any load is sent.
func (e *env) check(kinds []string) error {
	for _, t := range e.targets {
		for _, kind := range kinds {
			p, err := e.requestPath(kind)
			if err != nil {
				return err
			}
			req, err := http.NewRequest(http.MethodGet, t.url(p), nil)
			if err != nil {
				return err
			}
			req.Header = t.header.Clone()
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("%s %s: %w", t.name, kind, err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("%s %s: status %d: %.200s", t.name, kind, res.StatusCode, body)
			}
		}
	}
	return nil
}

// bufferPool is an httputil.BufferPool of 32 KiB copy buffers; it pools
// array pointers, so Put allocates nothing.
type bufferPool struct{ p sync.Pool }

const copyBufferSize = 32 << 10

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { return new([copyBufferSize]byte) }}}
}

func (b *bufferPool) Get() []byte { return b.p.Get().(*[copyBufferSize]byte)[:] }

func (b *bufferPool) Put(x []byte) {
	if cap(x) == copyBufferSize {
		b.p.Put((*[copyBufferSize]byte)(x[:copyBufferSize]))
	}
}

// versionHeader is X-Broker-API-Version in canonical form.
var versionHeader = http.CanonicalHeaderKey(osb.HeaderAPIVersion)

// decodeJSON requires status and decodes the JSON body of res into v.
func decodeJSON(res *http.Response, status int, v any) error {
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != status {
		return fmt.Errorf("status %d, want %d: %.200s", res.StatusCode, status, body)
	}
	return json.Unmarshal(body, v)
}
