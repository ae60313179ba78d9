package samplebroker

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// maxBodyBytes bounds request bodies.
const maxBodyBytes = 1 << 20

// decodeBody reads a JSON object request body into v.
func decodeBody(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return osb.Errorf(http.StatusBadRequest, "", "reading the request body: %v", err)
	}
	if len(body) > maxBodyBytes {
		return osb.Errorf(http.StatusRequestEntityTooLarge, "", "the request body exceeds %d bytes", maxBodyBytes)
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return osb.Errorf(http.StatusBadRequest, "", "the request body must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return osb.Errorf(http.StatusBadRequest, "", "the request body is not valid: %v", err)
	}
	return nil
}

// maintenanceInfo is the maintenance_info request field (OSB 2.15).
type maintenanceInfo struct {
	Version string `json:"version"`
}

// lookupPlan resolves service_id and plan_id as sent in a body or query.
// where names the source in messages ("body" or "query").
func (b *Broker) lookupPlan(serviceID, planID, where string) (*planDef, error) {
	switch {
	case serviceID == "":
		return nil, osb.Errorf(http.StatusBadRequest, "", "service_id is missing from the %s", where)
	case planID == "":
		return nil, osb.Errorf(http.StatusBadRequest, "", "plan_id is missing from the %s", where)
	}
	svc := b.defs.services[serviceID]
	if svc == nil {
		return nil, osb.Errorf(http.StatusBadRequest, "", "service_id %q names no service in the catalog", serviceID)
	}
	p := b.defs.plans[planID]
	if p == nil || p.service != svc {
		return nil, osb.Errorf(http.StatusBadRequest, "", "plan_id %q names no plan of service %q", planID, svc.name)
	}
	return p, nil
}

// queryPlan resolves the service_id and plan_id query parameters that
// deprovision and unbind must carry.
func (b *Broker) queryPlan(r *http.Request) (*planDef, error) {
	s, _ := queryValue(r.URL.RawQuery, "service_id")
	p, _ := queryValue(r.URL.RawQuery, "plan_id")
	return b.lookupPlan(s, p, "query")
}

// canonicalParams validates a "parameters" value and returns it as
// canonical JSON (sorted keys, no spaces) so that identical requests compare
// equal; nil and JSON null yield nil.
func canonicalParams(raw json.RawMessage) ([]byte, map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	var m map[string]any
	if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return nil, nil, osb.Errorf(http.StatusBadRequest, "", "parameters must be a JSON object")
	}
	if len(m) == 0 {
		return nil, m, nil
	}
	out, err := json.Marshal(m)
	return out, m, err
}

// checkParams holds parameters against the plan's schema, which only
// constrains "size".
func checkParams(p *planDef, m map[string]any) error {
	if !p.sizeSchema {
		return nil
	}
	v, ok := m["size"]
	if !ok {
		return nil
	}
	if s, isString := v.(string); !isString || !slices.Contains(sizes, s) {
		return osb.Errorf(http.StatusBadRequest, "", "parameters.size must be one of %q", sizes)
	}
	return nil
}

// checkMaintenance compares a request's maintenance_info with the plan's
// (OSB 2.15). Legacy brokers ignore the field.
func (b *Broker) checkMaintenance(p *planDef, mi *maintenanceInfo) error {
	if mi == nil || b.opts.Legacy || mi.Version == p.maint {
		return nil
	}
	if p.maint == "" {
		return &osb.Error{Status: http.StatusUnprocessableEntity, Code: osb.CodeMaintenanceInfoConflict,
			Description: "maintenance_info was sent, but plan " + p.name + " has none"}
	}
	return &osb.Error{Status: http.StatusUnprocessableEntity, Code: osb.CodeMaintenanceInfoConflict,
		Description: "maintenance_info.version " + strconv.Quote(mi.Version) + " does not match plan " + p.name + "'s " + p.maint}
}

// Common errors.
var (
	errAsyncRequired = &osb.Error{Status: http.StatusUnprocessableEntity, Code: osb.CodeAsyncRequired,
		Description: "This service plan requires client support for asynchronous service operations."}
	// errConcurrency carries the description the specification gives for
	// the code; clients (go-open-service-broker-client) match on both.
	errConcurrency = &osb.Error{Status: http.StatusUnprocessableEntity, Code: osb.CodeConcurrencyError,
		Description: "The Service Broker does not support concurrent requests that mutate the same resource."}
	errInstanceNotFound = osb.Errorf(http.StatusNotFound, "", "the service instance does not exist")
	errBindingNotFound  = osb.Errorf(http.StatusNotFound, "", "the service binding does not exist")
	errUnknownOperation = osb.Errorf(http.StatusBadRequest, "", "operation names no operation of this resource")
)

// concurrencyError is the 422 for a request that collides with an
// asynchronous operation in progress. The ConcurrencyError code exists
// since OSB 2.14; older platforms (and legacy mode) get the status and a
// description alone.
func (b *Broker) concurrencyError(c call) error {
	if !b.opts.Legacy && c.version.AtLeast(v2_14) {
		return errConcurrency
	}
	return &osb.Error{Status: http.StatusUnprocessableEntity,
		Description: "Another operation for this service instance is in progress."}
}

// emptyObject is the body "{}".
var emptyObject = []byte("{}\n")

// writeJSON writes a JSON body with status.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeValue marshals v and writes it with status.
func writeValue(w http.ResponseWriter, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	writeJSON(w, status, append(body, '\n'))
	return nil
}

// asyncJSON is the 202 body: the operation string (absent in legacy mode,
// which predates it) and, for instances, the dashboard URL.
type asyncJSON struct {
	DashboardURL string `json:"dashboard_url,omitempty"`
	Operation    string `json:"operation,omitempty"`
}

// checkOperation compares the last_operation "operation" query parameter,
// when sent, with the operation on record. Legacy brokers predate the
// parameter and ignore it.
func (b *Broker) checkOperation(r *http.Request, o *operation) error {
	if b.opts.Legacy {
		return nil
	}
	want, ok := queryValue(r.URL.RawQuery, "operation")
	if !ok || want == "" {
		return nil
	}
	if o == nil || o.id != want {
		return errUnknownOperation
	}
	return nil
}

// lastOpBody picks the precomputed last_operation body for o at now; nil
// means no asynchronous operation was ever started.
func (b *Broker) lastOpBody(o *operation, now time.Time) (body []byte, inProgress bool) {
	if o == nil {
		return noOperation, false
	}
	s := o.state(now)
	return b.lastOp[o.kind][s], s == stateInProgress
}

// writeLastOperation writes 200 with body, suggesting a polling interval
// while the operation is in progress (Retry-After, OSB 2.15).
func (b *Broker) writeLastOperation(w http.ResponseWriter, body []byte, inProgress bool) {
	if inProgress && !b.opts.Legacy {
		w.Header()["Retry-After"] = retryAfter
	}
	writeJSON(w, http.StatusOK, body)
}

// answerLastOperation finishes a last_operation request once the shard is
// unlocked: notFound when the resource is unknown, 400 for a foreign
// operation string, 410 once an asynchronous deletion finished, else 200.
func (b *Broker) answerLastOperation(w http.ResponseWriter, r *http.Request, exists, gone bool,
	o *operation, body []byte, inProgress bool, notFound error) error {
	if !exists {
		return notFound
	}
	if err := b.checkOperation(r, o); err != nil {
		return err
	}
	if gone {
		writeJSON(w, http.StatusGone, emptyObject)
		return nil
	}
	b.writeLastOperation(w, body, inProgress)
	return nil
}

// retryAfter is the polling interval suggested while an operation runs.
var retryAfter = []string{"1"}
