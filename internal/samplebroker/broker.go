// Package samplebroker is an honest, in-memory Open Service Broker API 2.17
// broker written on net/http. The gateway's demo, integration tests, fault
// tests and load benchmark run against it.
//
// It offers a bindable service "sample" with a synchronous and an
// asynchronous plan and a non-bindable service "sample-nobind" (see the ID
// constants). It answers with the status codes and bodies the specification
// prescribes, completes asynchronous operations lazily from its clock (no
// goroutine per operation), and in legacy mode behaves like an OSB 2.8 broker.
// Fault injection and per-endpoint request counters are reachable from Go and
// over HTTP under /_sample/ (see ControlPrefix).
//
// A Broker is safe for concurrent use. Its state lives in memory; with
// Options.StateFile (see Open) it also survives a crash of the process. With
// Options.CallLog it writes a line for every mutating call it served, with
// the calls for the same instance that overlapped it.
package samplebroker

import (
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Defaults for the command and the demo. Options left empty disable
// authentication; these are what cmd/osb-sample-broker uses when no flag or
// environment variable says otherwise.
const (
	DefaultUsername   = "sample"
	DefaultPassword   = "sample-secret"
	DefaultAsyncDelay = 2 * time.Second
)

// Options configures a Broker. The zero value is a valid, unauthenticated,
// non-legacy broker.
type Options struct {
	// Username and Password are the basic-auth credentials every request
	// (under /v2 and the control endpoints) must carry. An empty Username
	// disables authentication.
	Username string
	Password string

	// AsyncDelay is how long an asynchronous operation stays "in progress".
	// Zero means DefaultAsyncDelay (2s); a negative value makes asynchronous
	// operations finish at once (the first poll reports the outcome).
	AsyncDelay time.Duration

	// Legacy makes the broker behave like an OSB 2.8 broker: the catalog
	// leaves out fields newer than 2.8, provision requires top-level
	// organization_guid and space_guid, there are no GET instance, GET
	// binding or binding last_operation endpoints (404), binds and unbinds
	// are always synchronous, async responses carry no "operation", and
	// X-Broker-API-Request-Identity is not echoed. Zero value: a 2.17 broker.
	Legacy bool

	// Lax makes the broker careless the way some brokers in the field are:
	// a provision or bind of an id that exists creates it again (201, the
	// old one replaced) instead of answering 200 or 409, a deprovision or
	// unbind of what does not exist answers 200 instead of 410 Gone, and
	// organization_guid and space_guid are never checked. For testing what
	// the gateway's emulations (brokers[].emulate) make of such a broker.
	Lax bool

	// NotRetrievable makes the catalog leave out instances_retrievable and
	// bindings_retrievable (false) on every service, as a 2.14+ broker
	// that cannot answer GET instance and GET binding says it; the
	// endpoints themselves are still served. For testing the gateway's
	// fetch emulation (brokers[].emulate.fetch) in front of such a broker.
	// Zero value: the catalog says both are retrievable (but in legacy
	// mode, whose catalog has neither field).
	NotRetrievable bool

	// AsyncOnlyBindings makes binds and unbinds on the asynchronous plan
	// always asynchronous at OSB 2.14 and later: a request without
	// accepts_incomplete=true gets 422 AsyncRequired, as from a broker
	// that cannot bind within a request. Ignored in legacy mode, where
	// bindings are synchronous. Zero value: such requests are served
	// synchronously.
	AsyncOnlyBindings bool

	// Latency is added to every /v2 request before it is handled. Zero adds
	// nothing.
	Latency time.Duration

	// After is how the broker waits out a latency (Latency, a fault's
	// Latency): the wait ends when the channel it returns delivers. Tests
	// inject one they control, so that a slow call ends when the test says
	// rather than racing a timer. Nil means time.After.
	After func(time.Duration) <-chan time.Time

	// Now is the broker's clock, used for asynchronous operations. Nil means
	// time.Now.
	Now func() time.Time

	// MinVersion is the oldest X-Broker-API-Version accepted; older ones, a
	// missing header and a major version other than 2 get 412. The zero
	// value means 2.0.
	MinVersion osb.Version

	// VersionCode is the "error" code of the 412 a version below
	// MinVersion gets, as some brokers send one ("IncompatibleAPIVersion").
	// Empty: none.
	VersionCode string

	// StateFile is the path of a file that keeps the broker's state (every
	// instance and binding record, their asynchronous operations and the
	// operation counter) across a crash and restart: a journal of JSON
	// lines, appended before each answer that changed something is
	// written, replayed and compacted by Open. Only Open accepts it; New
	// panics when it is set. Empty: the state lives in memory only.
	StateFile string

	// CallLog, when not nil, receives one JSON line (a CallRecord) when a
	// provision, update, deprovision, bind or unbind request ends, written
	// with a single Write call. Nil: no log, and no cost.
	CallLog io.Writer
}

// Broker is an OSB broker; it implements http.Handler. Create one with New,
// or with Open for one that keeps its state in a file (and Close it).
type Broker struct {
	opts       Options
	now        func() time.Time
	asyncDelay time.Duration
	minVersion osb.Version
	authHeader string // "Basic <base64>", "" when authentication is off
	// creds, when set, replace the credentials of Options (credentials.go).
	creds   atomic.Pointer[credentials]
	defs    catalogDefs
	catalog atomic.Pointer[catalogResponse] // SetCatalog swaps it (catalog_swap.go)
	lastOp  lastOpBodies
	store   store
	opSeq   atomic.Uint64
	counts  [numEndpoints]atomic.Int64

	faultMu sync.Mutex
	faults  []*Fault     // guarded by faultMu
	nFaults atomic.Int32 // len(faults), read without the lock on the hot path

	journal *journal // nil without Options.StateFile
	calls   *callLog // nil without Options.CallLog
}

// New returns a Broker with empty state. It marshals the catalog once. It
// panics when opts.StateFile is set: a broker with a state file is opened
// with Open, which can report an unreadable file.
func New(opts Options) *Broker {
	if opts.StateFile != "" {
		panic("samplebroker: New with Options.StateFile set; use Open")
	}
	return newBroker(opts)
}

// Open returns a Broker. With opts.StateFile set it replays the state that
// file holds (a missing file is empty state), compacts it, and keeps it up
// to date from then on; Close closes it. Without a state file it is New.
func Open(opts Options) (*Broker, error) {
	b := newBroker(opts)
	if opts.StateFile == "" {
		return b, nil
	}
	if err := b.openJournal(opts.StateFile); err != nil {
		return nil, err
	}
	return b, nil
}

// Close closes the state file, if any; a request that changes state after
// Close gets a 500. It does not close Options.CallLog, which belongs to
// the caller. Close is safe to call more than once.
func (b *Broker) Close() error {
	if b.journal == nil {
		return nil
	}
	return b.journal.close()
}

func newBroker(opts Options) *Broker {
	b := &Broker{
		opts:       opts,
		now:        opts.Now,
		asyncDelay: opts.AsyncDelay,
		minVersion: opts.MinVersion,
		defs:       newCatalogDefs(),
		lastOp:     newLastOpBodies(opts.Legacy),
	}
	b.ResetCatalog()
	if b.now == nil {
		b.now = time.Now
	}
	switch {
	case b.asyncDelay == 0:
		b.asyncDelay = DefaultAsyncDelay
	case b.asyncDelay < 0:
		b.asyncDelay = 0
	}
	if b.minVersion.IsZero() {
		b.minVersion = osb.Oldest
	}
	if opts.Username != "" {
		b.authHeader = "Basic " + base64.StdEncoding.EncodeToString([]byte(opts.Username+":"+opts.Password))
	}
	b.store.init()
	if opts.CallLog != nil {
		b.calls = newCallLog(opts.CallLog)
	}
	return b
}

// Canonical header keys, to index http.Header maps without canonicalizing on
// every request.
var (
	keyVersion         = http.CanonicalHeaderKey(osb.HeaderAPIVersion)
	keyRequestIdentity = http.CanonicalHeaderKey(osb.HeaderRequestIdentity)
	jsonContentType    = []string{"application/json"}
	basicChallenge     = []string{`Basic realm="osb-sample-broker"`}
)

// call is one routed /v2 request.
type call struct {
	ep         endpoint
	instanceID string
	bindingID  string
	version    osb.Version
	now        time.Time
	failOp     bool // an injected fault asks the async operation to fail
}

// ServeHTTP routes /v2 requests to the OSB endpoints and /_sample/ requests
// to the control endpoints; anything else is a 404 OSB error.
func (b *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, ControlPrefix) {
		if b.authorized(r) {
			b.serveControl(w, r)
		} else {
			b.unauthorized(w)
		}
		return
	}
	if !b.opts.Legacy {
		if id := r.Header[keyRequestIdentity]; len(id) > 0 {
			w.Header()[keyRequestIdentity] = id
		}
	}
	ep, instanceID, bindingID, allow := route(r.Method, r.URL.Path)
	c := call{ep: ep, instanceID: instanceID, bindingID: bindingID}
	b.counts[c.ep].Add(1)
	if b.opts.Latency > 0 && !b.sleep(r, b.opts.Latency) {
		return
	}
	if !b.authorized(r) {
		b.unauthorized(w)
		return
	}
	if b.calls != nil && c.ep.mutating() {
		b.serveLogged(w, r, c, allow)
		return
	}
	b.serveAuthorized(w, r, c, allow)
}

// serveAuthorized serves an authenticated /v2 request: faults, then the
// endpoint.
func (b *Broker) serveAuthorized(w http.ResponseWriter, r *http.Request, c call, allow string) {
	if b.nFaults.Load() > 0 {
		var handled bool
		if handled, c.failOp = b.applyFault(w, r, c.ep); handled {
			return
		}
	}
	switch {
	case c.ep == epUnknown && allow != "":
		osb.WriteError(w, methodNotAllowed(w, r, allow))
		return
	case c.ep == epUnknown || b.opts.Legacy && c.ep.since214():
		osb.WriteError(w, osb.Errorf(http.StatusNotFound, "", "no endpoint %s %s", r.Method, r.URL.Path))
		return
	}
	v, err := b.checkVersion(r)
	if err != nil {
		osb.WriteError(w, err)
		return
	}
	c.version = v
	c.now = b.now()
	if err := b.dispatch(w, r, c); err != nil {
		osb.WriteError(w, err)
	}
}

// dispatch runs the endpoint's handler.
func (b *Broker) dispatch(w http.ResponseWriter, r *http.Request, c call) error {
	switch c.ep {
	case epCatalog:
		b.serveCatalog(w, r)
		return nil
	case epProvision:
		return b.provision(w, r, c)
	case epUpdate:
		return b.update(w, r, c)
	case epDeprovision:
		return b.deprovision(w, r, c)
	case epGetInstance:
		return b.getInstance(w, c)
	case epInstanceLastOperation:
		return b.instanceLastOperation(w, r, c)
	case epBind:
		return b.bind(w, r, c)
	case epUnbind:
		return b.unbind(w, r, c)
	case epGetBinding:
		return b.getBinding(w, c)
	case epBindingLastOperation:
		return b.bindingLastOperation(w, r, c)
	}
	return osb.Errorf(http.StatusNotFound, "", "no endpoint %s %s", r.Method, r.URL.Path)
}

// authorized reports whether r carries the broker's credentials. The common
// case, an Authorization header byte-identical to the expected one, costs no
// allocation; other spellings ("basic" in lower case) are decoded.
func (b *Broker) authorized(r *http.Request) bool {
	if c := b.creds.Load(); c != nil {
		return c.allows(r)
	}
	if b.authHeader == "" {
		return true
	}
	if h := r.Header["Authorization"]; len(h) > 0 && constantTimeEqual(h[0], b.authHeader) {
		return true
	}
	u, p, ok := r.BasicAuth()
	return ok && constantTimeEqual(u, b.opts.Username) && constantTimeEqual(p, b.opts.Password)
}

// unauthorized writes 401 with a basic-auth challenge and an OSB error body.
func (b *Broker) unauthorized(w http.ResponseWriter) {
	w.Header()["Www-Authenticate"] = basicChallenge
	osb.WriteError(w, osb.Errorf(http.StatusUnauthorized, "", "missing or wrong basic-auth credentials"))
}

// checkVersion parses X-Broker-API-Version and holds it against MinVersion.
func (b *Broker) checkVersion(r *http.Request) (osb.Version, error) {
	h := r.Header[keyVersion]
	if len(h) == 0 || h[0] == "" {
		return osb.Version{}, osb.Errorf(http.StatusPreconditionFailed, "",
			"%s is missing; this broker needs %s or newer", osb.HeaderAPIVersion, b.minVersion)
	}
	v, err := osb.ParseVersion(h[0])
	switch {
	case err != nil:
		return v, osb.Errorf(http.StatusPreconditionFailed, "", "%s: %v", osb.HeaderAPIVersion, err)
	case v.Major != osb.Latest.Major:
		return v, osb.Errorf(http.StatusPreconditionFailed, "",
			"%s %s has major version %d; this broker speaks %d.x", osb.HeaderAPIVersion, v, v.Major, osb.Latest.Major)
	case v.Less(b.minVersion):
		return v, osb.Errorf(http.StatusPreconditionFailed, b.opts.VersionCode,
			"%s %s is below %s, the lowest this broker accepts", osb.HeaderAPIVersion, v, b.minVersion)
	}
	return v, nil
}

// sleep waits d or until the request's context ends; it reports whether the
// full time passed.
func (b *Broker) sleep(r *http.Request, d time.Duration) bool {
	if b.opts.After != nil {
		select {
		case <-b.opts.After(d):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// constantTimeEqual compares two strings in time that depends only on their
// lengths.
func constantTimeEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return v == 0
}
