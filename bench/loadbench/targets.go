// This file builds the in-process targets: the sample broker itself
// (direct), a bare tuned httputil.ReverseProxy, and the real gateway, each on
// its own loopback http.Server with the gateway's default server settings.
// The catalog cache's brokers and targets are in cache.go.

package main

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
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
	// catalogRequests returns how many catalog requests the broker behind
	// t has received so far, or is nil.
	catalogRequests func() int64
	// counter, when not nil, is counted over the measured period instead
	// of catalogRequests: the connections the target's server accepted
	// (tls) or the spans its exporter received (tracing).
	counter func() int64
	// tls, when not nil, is the client configuration for an https target.
	tls *tls.Config
	// flood, when not nil, sends wrong passwords beside the measured
	// calls (auth-flood).
	flood *flooder
	close func()
}

// url returns the absolute URL of path ("/v2/...") at t.
func (t *target) url(path string) string { return t.base + path }

// env is the benchmark's world: the brokers and every target in front of
// them.
type env struct {
	broker    *target   // direct
	targets   []*target // the pass-through kinds' (catalog, last_operation)
	cache     []*target // catalog-cache's
	large     []*target // catalog-1mb's
	tlsRun    []*target // tls's (extra.go), once startExtra ran
	tracing   []*target // tracing's (extra.go), once startExtra ran
	auditDir  string    // where tracing's gateways write their audit logs
	provision []*target // provision's (provision.go), once startExtra ran
	authFlood []*target // auth-flood's (authflood.go), once startExtra ran
	stateDir  string    // where gateway bolt keeps its state file
	// gateway is the gateway behind targetGateway, and urls the brokers'
	// base URLs by gatewayYAML variable, for startExtra.
	gateway   http.Handler
	urls      map[string]string
	operation string // the operation string of instanceID's provision
	// refs are the catalog bytes the cache kinds' targets must answer with.
	refs    map[string][]byte
	closers []func()
}

// targetsFor returns the targets a request kind is sent to, in report
// order.
func (e *env) targetsFor(kind string) []*target {
	switch kind {
	case kindCatalogCache:
		return e.cache
	case kindCatalogLarge:
		return e.large
	case kindTLS:
		return e.tlsRun
	case kindTracing:
		return e.tracing
	case kindProvision:
		return e.provision
	case kindAuthFlood:
		return e.authFlood
	case kindPollShield:
		return nil // its own targets (pollshield.go)
	}
	return e.targets
}

// targetNames lists the names of the kinds' targets, each once, in report
// order.
func (e *env) targetNames(kinds []string) []string {
	var names []string
	for _, kind := range kinds {
		for _, t := range e.targetsFor(kind) {
			if !slices.Contains(names, t.name) {
				names = append(names, t.name)
			}
		}
	}
	return names
}

// close stops every server and process env started, last first; calling
// it again does nothing.
func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	e.closers = nil
}

// newEnv starts the sample broker, provisions instanceID, starts the
// catalog cache's brokers (catalog-1mb's catalog of at least largeSize
// bytes), and starts the bare proxy and the gateway in front of them. nginx
// is added by the caller when wanted.
func newEnv(largeSize int) (*env, error) {
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
	counter := func() int64 { return b.Count(samplebroker.EndpointCatalog) }
	e.broker = &target{name: targetDirect, base: base, header: brokerHeader(), catalogRequests: counter}
	if e.operation, err = provision(e.broker); err != nil {
		return nil, err
	}
	e.targets = append(e.targets, e.broker)
	cb, err := e.startCacheBrokers(b.Catalog(), largeSize)
	if err != nil {
		return nil, err
	}

	bare, err := newBare(base)
	if err != nil {
		return nil, err
	}
	bare.catalogRequests = counter
	e.closers = append(e.closers, bare.close)
	e.urls = map[string]string{"BROKER_URL": base, "COMPOSED_URL": cb.composed, "LARGE_URL": cb.large}
	gw, handler, stop, err := newGateway(e.urls)
	if err != nil {
		return nil, err
	}
	e.gateway = handler
	e.closers = append(e.closers, stop)
	e.targets = append(e.targets, bare, &target{name: targetGateway, base: gw + "/" + tenantName + "/" + brokerName,
		header: platformHeader(), catalogRequests: counter})
	e.addCacheTargets(gw, cb)
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
	rp, tr, err := bareProxy(brokerURL)
	if err != nil {
		return nil, err
	}
	base, stop, err := serve("bare", rp)
	if err != nil {
		return nil, fmt.Errorf("bare proxy: %w", err)
	}
	return &target{name: targetBare, base: base, header: platformHeader(),
		close: func() { stop(); tr.CloseIdleConnections() }}, nil
}

// bareProxy builds newBare's handler and its transport.
func bareProxy(brokerURL string) (*httputil.ReverseProxy, *http.Transport, error) {
	u, err := url.Parse(brokerURL)
	if err != nil {
		return nil, nil, err
	}
	rp, tr := reference.BareProxy(u, basic(brokerUser, brokerPass), maxConnsPerTarget)
	return rp, tr, nil
}

// maxConnsPerTarget sizes the proxies' idle pools: more than the highest
// connection count the benchmark is meant for.
const maxConnsPerTarget = 256

// requestPath returns the path ("/v2/...") of a request kind.
func (e *env) requestPath(kind string) (string, error) {
	switch kind {
	case kindCatalog, kindCatalogCache, kindCatalogLarge:
		return "/v2/catalog", nil
	case kindLastOperation, kindTLS, kindTracing, kindAuthFlood:
		q := url.Values{"service_id": {samplebroker.ServiceID}, "plan_id": {samplebroker.PlanAsyncID},
			"operation": {e.operation}}
		return "/v2/service_instances/" + instanceID + "/last_operation?" + q.Encode(), nil
	case kindProvision:
		return "", nil // a new instance per request (provisionRequests)
	case kindPollShield:
		return "", nil // its own operations (pollshield.go)
	}
	return "", fmt.Errorf("unknown request kind %q (want one of %s)", kind, strings.Join(knownKinds, ", "))
}

// check sends each kind of request once to every target of the kind and
// requires 200, so a misconfigured target fails before any load is sent.
// The cache kinds' answers are compared with the broker's catalog bytes;
// check returns what it found. Through the gateway, this first request
// fills the catalog cache.
func (e *env) check(kinds []string) ([]catalogInfo, error) {
	var infos []catalogInfo
	for _, kind := range kinds {
		if kind == kindProvision {
			if err := e.checkProvision(); err != nil {
				return nil, err
			}
			continue
		}
		if kind == kindPollShield {
			continue // its provisions check its targets (pollshield.go)
		}
		p, err := e.requestPath(kind)
		if err != nil {
			return nil, err
		}
		ref, compare := e.refs[kind]
		info := newCatalogInfo(kind, ref)
		for _, t := range e.targetsFor(kind) {
			body, err := get(t, p)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", t.name, kind, err)
			}
			if compare && !bytes.Equal(body, ref) {
				info.Identical = false
				info.Different = append(info.Different, fmt.Sprintf("%s: %d bytes, sha256 %s", t.name, len(body), sha256Hex(body)))
			}
		}
		if compare {
			infos = append(infos, info)
		}
	}
	return infos, nil
}
