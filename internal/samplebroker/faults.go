package samplebroker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Fault makes the broker misbehave on matching /v2 requests, after
// authentication and before anything else. Faults are checked in the order
// they were injected; the first that matches a request applies to it.
//
// In JSON (PUT /_sample/fault) the fields are "endpoint", "status", "body",
// "hang", "latency" (a Go duration string such as "250ms"), "count" and
// "fail_operation".
type Fault struct {
	// Endpoint is the endpoint name the fault applies to (EndpointCatalog,
	// EndpointProvision, EndpointLastOperation, ...). Empty: every endpoint.
	Endpoint string
	// Status, when not zero, is written instead of the real answer, with
	// Body or, when Body is empty, an OSB error body.
	Status int
	// Body, when not empty, is written verbatim as the response body (with
	// Content-Type application/json, even if it is not JSON) instead of the
	// real answer; its status is Status, or 200 when Status is zero.
	Body string
	// Hang blocks the request until its context ends (the client gives up
	// or the server closes the connection); nothing is written. A graceful
	// http.Server.Shutdown waits for it like for any active request.
	Hang bool
	// Latency delays the request by this much before the rest of the fault
	// or the real answer. Zero adds nothing.
	Latency time.Duration
	// Count is how many matching requests the fault applies to before it
	// removes itself. Zero: until cleared.
	Count int
	// FailOperation lets the request be answered normally, but an
	// asynchronous operation it starts ends in state "failed" instead of
	// "succeeded". It does not affect synchronous requests.
	FailOperation bool
}

// faultJSON is Fault on the wire.
type faultJSON struct {
	Endpoint      string `json:"endpoint,omitempty"`
	Status        int    `json:"status,omitempty"`
	Body          string `json:"body,omitempty"`
	Hang          bool   `json:"hang,omitempty"`
	Latency       string `json:"latency,omitempty"`
	Count         int    `json:"count,omitempty"`
	FailOperation bool   `json:"fail_operation,omitempty"`
}

// MarshalJSON implements json.Marshaler; Latency becomes a duration string.
func (f Fault) MarshalJSON() ([]byte, error) {
	j := faultJSON{Endpoint: f.Endpoint, Status: f.Status, Body: f.Body, Hang: f.Hang,
		Count: f.Count, FailOperation: f.FailOperation}
	if f.Latency != 0 {
		j.Latency = f.Latency.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON implements json.Unmarshaler; unknown fields are errors.
func (f *Fault) UnmarshalJSON(b []byte) error {
	var j faultJSON
	if err := strictUnmarshal(b, &j); err != nil {
		return err
	}
	*f = Fault{Endpoint: j.Endpoint, Status: j.Status, Body: j.Body, Hang: j.Hang,
		Count: j.Count, FailOperation: j.FailOperation}
	if j.Latency != "" {
		d, err := time.ParseDuration(j.Latency)
		if err != nil {
			return fmt.Errorf("latency: %w", err)
		}
		f.Latency = d
	}
	return nil
}

// validate reports what is wrong with f.
func (f *Fault) validate() error {
	var errs []error
	if _, ok := endpointByName(f.Endpoint); f.Endpoint != "" && !ok {
		errs = append(errs, fmt.Errorf("endpoint %q is not an endpoint name", f.Endpoint))
	}
	if f.Status != 0 && (f.Status < 200 || f.Status > 599) {
		errs = append(errs, fmt.Errorf("status %d is not between 200 and 599", f.Status))
	}
	if f.Latency < 0 {
		errs = append(errs, fmt.Errorf("latency %v is negative", f.Latency))
	}
	if f.Count < 0 {
		errs = append(errs, fmt.Errorf("count %d is negative", f.Count))
	}
	return errors.Join(errs...)
}

// InjectFault adds a fault after those already in place. It returns an error,
// and adds nothing, when the fault names an unknown endpoint or has an
// out-of-range status, latency or count.
func (b *Broker) InjectFault(f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	b.faults = append(b.faults, &f)
	b.nFaults.Store(int32(len(b.faults)))
	return nil
}

// ClearFaults removes every fault.
func (b *Broker) ClearFaults() {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	b.faults = nil
	b.nFaults.Store(0)
}

// Faults returns the faults in place; Count shows what is left of each.
func (b *Broker) Faults() []Fault {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	fs := make([]Fault, len(b.faults))
	for i, f := range b.faults {
		fs[i] = *f
	}
	return fs
}

// takeFault finds the first fault matching ep and uses up one of its count.
func (b *Broker) takeFault(ep endpoint) (Fault, bool) {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	for i, f := range b.faults {
		if e, _ := endpointByName(f.Endpoint); f.Endpoint != "" && e != ep {
			continue
		}
		taken := *f
		if f.Count > 0 {
			f.Count--
			if f.Count == 0 {
				b.faults = append(b.faults[:i:i], b.faults[i+1:]...)
				b.nFaults.Store(int32(len(b.faults)))
			}
		}
		return taken, true
	}
	return Fault{}, false
}

// applyFault carries out the first fault matching ep, if any. handled
// reports that the fault answered (or abandoned) the request; failOp that
// the request's asynchronous operation is to fail.
func (b *Broker) applyFault(w http.ResponseWriter, r *http.Request, ep endpoint) (handled, failOp bool) {
	f, ok := b.takeFault(ep)
	if !ok {
		return false, false
	}
	if f.apply(b, w, r) {
		return true, false
	}
	return false, f.FailOperation
}

// apply carries out the fault and reports whether it answered the request
// (or abandoned it), so that the real handler must not run.
func (f *Fault) apply(b *Broker, w http.ResponseWriter, r *http.Request) bool {
	if f.Latency > 0 && !b.sleep(r, f.Latency) {
		return true
	}
	switch {
	case f.Hang:
		// Read the body first: only then does net/http watch the connection
		// and cancel the request's context when the client goes away.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		return true
	case f.Body != "":
		status := f.Status
		if status == 0 {
			status = http.StatusOK
		}
		writeJSON(w, status, []byte(f.Body))
		return true
	case f.Status != 0:
		osb.WriteError(w, osb.Errorf(f.Status, "", "injected fault: status %d", f.Status))
		return true
	}
	return false
}
