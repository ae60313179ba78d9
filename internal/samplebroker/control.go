package samplebroker

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// ControlPrefix is the path prefix of the control endpoints. They sit outside
// /v2, need the same credentials as /v2, are not counted and get neither
// Options.Latency nor faults:
//
//	GET    /_sample/fault  the faults in place, a JSON array of Fault
//	PUT    /_sample/fault  add one Fault (a JSON object) or several (an
//	                       array); 200 with the faults now in place, 400 and
//	                       nothing added when any is invalid
//	DELETE /_sample/fault  remove every fault; 204
//	GET    /_sample/stats  requests per endpoint name, a JSON object
//	DELETE /_sample/stats  reset the counts; 204
//	GET    /_sample/holdings  what the broker holds now, Holdings as JSON:
//	                       {"instances":["id",...],"bindings":["id/bid",...]}
const ControlPrefix = "/_sample/"

// Control paths.
const (
	controlFault    = ControlPrefix + "fault"
	controlStats    = ControlPrefix + "stats"
	controlHoldings = ControlPrefix + "holdings"
)

// serveControl answers the control endpoints; the caller has authenticated
// the request.
func (b *Broker) serveControl(w http.ResponseWriter, r *http.Request) {
	var err error
	switch r.URL.Path {
	case controlFault:
		err = b.serveFault(w, r)
	case controlStats:
		err = b.serveStats(w, r)
	case controlHoldings:
		err = b.serveHoldings(w, r)
	default:
		err = osb.Errorf(http.StatusNotFound, "", "no control endpoint %s", r.URL.Path)
	}
	if err != nil {
		osb.WriteError(w, err)
	}
}

func (b *Broker) serveFault(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodGet:
		return writeValue(w, http.StatusOK, b.Faults())
	case http.MethodPut:
		fs, err := readFaults(r)
		if err != nil {
			return err
		}
		for _, f := range fs {
			if err := f.validate(); err != nil {
				return osb.Errorf(http.StatusBadRequest, "", "fault: %v", err)
			}
		}
		for _, f := range fs {
			_ = b.InjectFault(f) // validated above
		}
		return writeValue(w, http.StatusOK, b.Faults())
	case http.MethodDelete:
		b.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return methodNotAllowed(w, r, "DELETE, GET, PUT")
}

// readFaults decodes a Fault object or an array of them.
func readFaults(r *http.Request) ([]Fault, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	if err != nil {
		return nil, osb.Errorf(http.StatusBadRequest, "", "reading the request body: %v", err)
	}
	body = bytes.TrimSpace(body)
	var fs []Fault
	switch {
	case len(body) > 0 && body[0] == '[':
		err = strictUnmarshal(body, &fs)
	default:
		var f Fault
		err = strictUnmarshal(body, &f)
		fs = []Fault{f}
	}
	if err != nil {
		return nil, osb.Errorf(http.StatusBadRequest, "", "the body must be a fault object or an array of them: %v", err)
	}
	return fs, nil
}

func (b *Broker) serveStats(w http.ResponseWriter, r *http.Request) error {
	switch r.Method {
	case http.MethodGet:
		return writeValue(w, http.StatusOK, b.Counts())
	case http.MethodDelete:
		b.ResetCounts()
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return methodNotAllowed(w, r, "DELETE, GET")
}

func (b *Broker) serveHoldings(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return methodNotAllowed(w, r, "GET")
	}
	h := b.Holdings()
	if h.Instances == nil {
		h.Instances = []string{}
	}
	if h.Bindings == nil {
		h.Bindings = []string{}
	}
	return writeValue(w, http.StatusOK, h)
}

// methodNotAllowed is the 405 error with its Allow header.
func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) error {
	w.Header().Set("Allow", allow)
	return osb.Errorf(http.StatusMethodNotAllowed, "", "%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow)
}

// strictUnmarshal decodes exactly one JSON value, rejecting unknown fields.
func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
