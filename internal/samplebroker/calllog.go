package samplebroker

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// CallRecord is one line of the call log (Options.CallLog): a provision,
// update, deprovision, bind or unbind request that passed authentication,
// written when it ended, whatever its outcome (an injected fault's answer,
// a client that went away). A checker reads the log to tell whether the
// broker ever served two mutating calls for one instance at once.
type CallRecord struct {
	// Start is when the broker began serving the request (after
	// authentication, before faults), End when it finished; the broker's
	// clock, RFC 3339 with nanoseconds in JSON.
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Endpoint is the endpoint name (EndpointProvision, ...).
	Endpoint   string `json:"endpoint"`
	InstanceID string `json:"instance_id"`
	BindingID  string `json:"binding_id"` // "" for instance calls
	// Status is the status written, 0 when nothing was (a hang fault whose
	// client went away).
	Status int `json:"status"`
	// Async is set when the broker answered 202 for an asynchronous
	// operation, whose id Operation holds (also in legacy mode, whose 202
	// body has none). Operation is "" otherwise.
	Async     bool   `json:"async"`
	Operation string `json:"operation"`
	// InFlight are the other mutating requests for the same instance (any
	// endpoint, any of its bindings) this broker was serving when this one
	// started; empty, never null, when there were none.
	InFlight []CallFlight `json:"in_flight"`
	// InProgress is the asynchronous operation still in progress (not yet
	// due) when the request started: the instance's; for a binding call
	// the instance's or else that binding's; for an instance call, else
	// that of the instance's binding with the lowest id. Nil (omitted) when
	// none.
	InProgress *CallOperation `json:"in_progress,omitempty"`
}

// CallFlight is a mutating request in flight.
type CallFlight struct {
	Endpoint  string `json:"endpoint"`
	BindingID string `json:"binding_id"`
}

// CallOperation is an asynchronous operation in progress: Endpoint is the
// name of the endpoint that started it (EndpointProvision, EndpointBind,
// ...), BindingID "" for an instance's operation.
type CallOperation struct {
	Endpoint  string `json:"endpoint"`
	BindingID string `json:"binding_id"`
	Operation string `json:"operation"`
}

// callLog writes the call log and tracks the mutating requests in flight
// per instance.
type callLog struct {
	wmu sync.Mutex
	w   io.Writer

	mu       sync.Mutex
	inFlight map[string][]*CallFlight // by instance id; guarded by mu
}

func newCallLog(w io.Writer) *callLog {
	return &callLog{w: w, inFlight: make(map[string][]*CallFlight)}
}

// enter records f as in flight for instanceID and returns the others.
func (l *callLog) enter(instanceID string, f *CallFlight) []CallFlight {
	l.mu.Lock()
	defer l.mu.Unlock()
	others := make([]CallFlight, 0, len(l.inFlight[instanceID]))
	for _, o := range l.inFlight[instanceID] {
		others = append(others, *o)
	}
	l.inFlight[instanceID] = append(l.inFlight[instanceID], f)
	return others
}

// leave removes f from instanceID's flights.
func (l *callLog) leave(instanceID string, f *CallFlight) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fs := l.inFlight[instanceID]
	if i := slices.Index(fs, f); i >= 0 {
		fs = slices.Delete(fs, i, i+1)
	}
	if len(fs) == 0 {
		delete(l.inFlight, instanceID)
	} else {
		l.inFlight[instanceID] = fs
	}
}

// write appends rec as one line with a single Write. A failed write is
// dropped: the log must not change what the broker answers.
func (l *callLog) write(rec *CallRecord) {
	line, err := json.Marshal(rec)
	if err != nil {
		return
	}
	line = append(line, '\n')
	l.wmu.Lock()
	defer l.wmu.Unlock()
	_, _ = l.w.Write(line)
}

// callWriter notes the status written and the operation a 202 stands for.
type callWriter struct {
	http.ResponseWriter
	status int
	op     string
}

func (w *callWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *callWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *callWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serveLogged serves an authenticated mutating request and logs it.
func (b *Broker) serveLogged(w http.ResponseWriter, r *http.Request, c call, allow string) {
	self := &CallFlight{Endpoint: c.ep.String(), BindingID: c.bindingID}
	rec := CallRecord{Start: b.now(), Endpoint: self.Endpoint, InstanceID: c.instanceID, BindingID: c.bindingID}
	rec.InFlight = b.calls.enter(c.instanceID, self)
	rec.InProgress = b.inProgress(c, rec.Start)
	cw := &callWriter{ResponseWriter: w}
	defer func() {
		b.calls.leave(c.instanceID, self)
		rec.End = b.now()
		rec.Status, rec.Operation, rec.Async = cw.status, cw.op, cw.op != ""
		b.calls.write(&rec)
	}()
	b.serveAuthorized(cw, r, c, allow)
}

// inProgress finds the asynchronous operation in progress at now that a
// call on c's instance (and binding) meets, or nil.
func (b *Broker) inProgress(c call, now time.Time) *CallOperation {
	sh := b.store.lock(c.instanceID)
	defer sh.mu.Unlock()
	in := sh.get(c.instanceID, now)
	if in == nil {
		return nil
	}
	if in.op.busy() {
		return &CallOperation{Endpoint: opNames[in.op.kind], Operation: in.op.id}
	}
	if c.bindingID == "" {
		// An instance call during an asynchronous operation on one of
		// its bindings: the binding with the lowest id is reported.
		var found *CallOperation
		for id, bd := range in.bindings {
			bd.settle(now)
			if bd.op.busy() && (found == nil || id < found.BindingID) {
				found = &CallOperation{Endpoint: opNames[bd.op.kind], BindingID: id, Operation: bd.op.id}
			}
		}
		return found
	}
	bd := in.bindings[c.bindingID]
	if bd == nil {
		return nil
	}
	bd.settle(now)
	if bd.op.busy() {
		return &CallOperation{Endpoint: opNames[bd.op.kind], BindingID: c.bindingID, Operation: bd.op.id}
	}
	return nil
}
