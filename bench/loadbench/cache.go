// This file builds the catalog cache's brokers and targets. catalog-cache
// runs the sample broker directly (it serves its catalog from precomputed
// bytes), a second sample broker that takes composeTime per request — a
// broker that composes its catalog per request — and the gateway in front
// of that slow broker, whose catalog cache answers without asking it.
// catalog-1mb runs a broker reduced to a precomputed 1 MiB catalog, directly
// and through the gateway.

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// The cache kinds' target names, besides targetDirect.
const (
	targetComposed = "direct 5 ms"
	targetCached   = "gateway cached"
)

const (
	// composeTime is how long the composing broker takes per request. It
	// waits rather than burns CPU: a real broker composes on its own
	// machine, so the gateway sees the time as latency only. At n
	// connections the broker cannot answer more than n/composeTime
	// requests per second.
	composeTime = 5 * time.Millisecond
	// largeCatalogSize is the least size of catalog-1mb's catalog.
	largeCatalogSize = 1 << 20

	// Broker names in gatewayYAML.
	composedName = "composed"
	largeName    = "large"
)

// cacheBrokers are the base URLs of the catalog cache's brokers, and how
// to count the catalog requests each receives.
type cacheBrokers struct {
	composed, large                 string
	composedRequests, largeRequests func() int64
}

// startCacheBrokers starts the composing sample broker and the broker of a
// catalog of at least largeSize bytes, and records the catalog bytes the
// cache kinds must answer with: catalog, the sample broker's, for
// catalog-cache.
func (e *env) startCacheBrokers(catalog []byte, largeSize int) (cacheBrokers, error) {
	var cb cacheBrokers
	slow := samplebroker.New(samplebroker.Options{Username: brokerUser, Password: brokerPass, Latency: composeTime})
	base, stop, err := serve("broker", slow)
	if err != nil {
		return cb, fmt.Errorf("composing broker: %w", err)
	}
	e.closers = append(e.closers, stop)
	cb.composed = base
	cb.composedRequests = func() int64 { return slow.Count(samplebroker.EndpointCatalog) }

	large := newCatalogBroker(largeCatalog(largeSize), basic(brokerUser, brokerPass))
	if base, stop, err = serve("broker", large); err != nil {
		return cb, fmt.Errorf("large catalog broker: %w", err)
	}
	e.closers = append(e.closers, stop)
	cb.large = base
	cb.largeRequests = large.requests.Load

	e.refs = map[string][]byte{kindCatalogCache: catalog, kindCatalogLarge: large.body}
	return cb, nil
}

// addCacheTargets adds the cache kinds' targets: the brokers in cb directly
// and through the gateway at gatewayURL.
func (e *env) addCacheTargets(gatewayURL string, cb cacheBrokers) {
	at := func(broker string) string { return gatewayURL + "/" + tenantName + "/" + broker }
	e.cache = []*target{
		e.broker,
		{name: targetComposed, base: cb.composed, header: brokerHeader(), catalogRequests: cb.composedRequests},
		{name: targetCached, base: at(composedName), header: platformHeader(), catalogRequests: cb.composedRequests},
	}
	e.large = []*target{
		{name: targetDirect, base: cb.large, header: brokerHeader(), catalogRequests: cb.largeRequests},
		{name: targetCached, base: at(largeName), header: platformHeader(), catalogRequests: cb.largeRequests},
	}
}

// catalogBroker is a broker reduced to GET /v2/catalog, answered from
// precomputed bytes to requests with its credentials. It counts the
// catalog requests it receives, authorized or not. It is safe for
// concurrent use.
type catalogBroker struct {
	body     []byte
	length   []string // Content-Length
	auth     string   // the expected Authorization header
	requests atomic.Int64
}

func newCatalogBroker(body []byte, auth string) *catalogBroker {
	return &catalogBroker{body: body, length: []string{strconv.Itoa(len(body))}, auth: auth}
}

var jsonContentType = []string{"application/json"}

func (b *catalogBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/v2/catalog" {
		osb.WriteError(w, osb.Errorf(http.StatusNotFound, "", "no endpoint %s %s", r.Method, r.URL.Path))
		return
	}
	b.requests.Add(1)
	if a := r.Header["Authorization"]; len(a) != 1 || a[0] != b.auth {
		osb.WriteError(w, osb.Errorf(http.StatusUnauthorized, "", "wrong or missing credentials"))
		return
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = b.length
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.body)
}

// catalogInfo is what check found of a cache kind's catalog: its size,
// shape and hash at the broker, and whether every target answered with the
// same bytes.
type catalogInfo struct {
	Request   string   `json:"request"`
	Bytes     int      `json:"bytes"`
	Services  int      `json:"services"`
	Plans     int      `json:"plans"`
	SHA256    string   `json:"sha256"`
	Identical bool     `json:"identical"`
	Different []string `json:"different,omitempty"` // the targets that answered otherwise
}

func newCatalogInfo(kind string, ref []byte) catalogInfo {
	info := catalogInfo{Request: kind, Bytes: len(ref), SHA256: sha256Hex(ref), Identical: true}
	var shape struct {
		Services []struct {
			Plans []struct{} `json:"plans"`
		} `json:"services"`
	}
	if json.Unmarshal(ref, &shape) == nil {
		info.Services = len(shape.Services)
		for _, s := range shape.Services {
			info.Plans += len(s.Plans)
		}
	}
	return info
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
