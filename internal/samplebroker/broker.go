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
