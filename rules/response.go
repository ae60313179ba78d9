package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// ResponseOptions is what the gateway knows about an exchange beyond the
// call itself. The zero value knows nothing, and the rules that need more
// are skipped.
type ResponseOptions struct {
	// Request is the request body as CheckRequest decoded it. A bind
	// answer's syslog_drain_url, route_service_url and volume_mounts are
	// checked against the "requires" of the service its service_id names
	// (for GET binding, the service_id query parameter, OSB 2.16). Nil: the
	// call's query is all there is.
	Request *Request
	// Polled is the endpoint whose operation a last_operation call polls, as
	// the gateway recorded it when the broker answered 202: Provision,
	// Update or Deprovision for an instance, Bind or Unbind for a binding.
	// 410 Gone is a valid last_operation answer only while a Deprovision or
	// Unbind is polled. Unknown, the zero value, means the gateway does not
	// know, and 410 passes.
	Polled Endpoint
	// Platform is the API version the platform speaks, when it is newer
	// than the version the broker was called at (a capped broker): the
	// fields of a success body and the failure fields of 2.16
	// (instance_usable, update_repeatable) are checked at the newer of the
	// two, since the platform reads them by its version's specification,
	// whatever they mean to the broker. The zero value: the call's version.
	Platform osb.Version
	// RetryAfter are the answer's Retry-After header values (nil: none),
	// checked on last_operation answers.
	RetryAfter []string
}

// CheckResponse checks a broker's answer to a call made at API version v:
// the status against the specification's table for the endpoint (see
// statusTable) and the body against the checks Cloud Controller makes, and,
// when cat is not nil, against the broker's catalog. It returns what it
// read of the answer, as ReadResponse reads it (whatever the rules find),
// and the violations in the order the rules ran; none means the answer
// passes. Each violation has status 502: a gateway in enforce mode answers
// with Reject(violations) instead of the broker's answer. The body is
// decoded once, for both.
//
// The rules, by id:
//
//   - response.status.unexpected: a 1xx, 2xx or 3xx status the endpoint
//     does not have at v (4xx and 5xx are always allowed: brokers answer
//     failures with "an appropriate HTTP response code").
//   - response.status.not_async: 202 Accepted to a request without
//     accepts_incomplete=true.
//   - response.last_operation.gone: 410 Gone to a last_operation poll of a
//     provision, update or bind (see ResponseOptions.Polled).
//   - response.body.syntax, response.body.not_object: every body of a
//     success or an error, the catalog's included, must be a JSON object.
//     The catalog's content is the catalog Index's to check.
//   - response.error.type, response.error.description: in an error body,
//     "error" and "description" must be strings (non-empty from 2.12).
//   - response.error.code: an error code other than the one the
//     specification fixes for the status (422 to GET instance:
//     ConcurrencyError).
//   - response.error.async_required: 422 AsyncRequired to a request that
//     had accepts_incomplete=true.
//   - response.<field>.type: a field of the wrong JSON type (null counts
//     as absent): response.dashboard_url.type, response.operation.type,
//     response.credentials.type, response.syslog_drain_url.type,
//     response.route_service_url.type, response.volume_mounts.type,
//     response.last_operation.description.type.
//   - response.last_operation.state: "state" missing, or not "in progress",
//     "succeeded" or "failed".
//   - response.last_operation.retry_after: a Retry-After header
//     (ResponseOptions.RetryAfter) that is not one whole number of seconds
//     or HTTP-date, in a last_operation answer of any status.
//   - response.operation.length: "operation" longer than 10,000 characters
//     (OSB 2.15).
//   - response.dashboard_url.absolute: a dashboard_url that is not an
//     absolute URL.
//   - response.bind.async_credentials: credentials in a 202 to a bind.
//   - response.bind.requires: syslog_drain_url, route_service_url or
//     volume_mounts from a service whose "requires" lacks syslog_drain,
//     route_forwarding or volume_mount.
//   - response.instance_usable.type, response.update_repeatable.type: from
//     2.16, in an error answer or an instance last_operation answer, a
//     value that is no boolean.
//   - response.instance_usable.operation,
//     response.update_repeatable.operation: one that describes the failure
//     of an operation it does not apply to: instance_usable describes a
//     failed update or deprovision, update_repeatable a failed update (an
//     error answer to the call, or a last_operation whose state is failed
//     while that operation is polled; see ResponseOptions.Polled). Binding
//     last_operation answers define neither: there they are left alone.
//   - response.metadata.type, response.metadata.expires_at.type and
//     .format, response.metadata.renew_before.type and .format: from 2.17,
//     a bind (200, 201) or GET binding (200) answer whose "metadata" is no
//     object, or whose expires_at or renew_before is no RFC 3339 timestamp.
//   - response.metadata.renew_before.after_expiry: renew_before later than
//     expires_at.
//
// The fields of a success body and the failure fields are checked at the
// newer of v and ResponseOptions.Platform; the status and the rest of an
// error body at v.
func CheckResponse(c Call, v osb.Version, status int, body []byte, cat CatalogView, opts ResponseOptions) (Answer, []Violation) {
	var buf [16]jsonfast.Member // most answers have fewer members: no allocation
	a, fields, shape := readAnswer(c, status, body, buf[:0])
	var vs violationList
	row := checkStatus(c, v, status, opts, &vs)
	checkRetryAfter(c, opts.RetryAfter, &vs)
	success := status >= 200 && status <= 299 && row != nil
	if !success && !isErrorStatus(status) {
		return a, vs
	}
	if !checkShape(c, status, body, shape, &vs) {
		return a, vs
	}
	read := v
	if v.Less(opts.Platform) {
		read = opts.Platform
	}
	if success {
		checkSuccessBody(c, read, status, body, fields, cat, opts, &vs)
		if c.Endpoint == InstanceLastOperation && status == http.StatusOK {
			checkFailureFields(read, body, fields, polledFailure(a.State, opts.Polled), "the broker's last_operation answer", &vs)
		}
		checkExpiry(c, read, status, body, fields, &vs)
	} else {
		checkErrorBody(c, v, status, row, body, fields, &vs)
		checkFailureFields(read, body, fields, c.Endpoint,
			fmt.Sprintf("the broker's %s answer to %s", describeStatus(status), c.Endpoint.describe()), &vs)
	}
	if len(vs) == 0 {
		return a, nil
	}
	return a, vs
}

// addResponse appends a response violation: status 502, no code.
func (vs *violationList) addResponse(rule, description string) {
	*vs = append(*vs, Violation{Rule: rule, Status: http.StatusBadGateway, Description: description})
}

// checkShape reports whether a body that must be a JSON object is one,
// and adds the violation when it is not.
func checkShape(c Call, status int, body []byte, shape bodyShape, vs *violationList) bool {
	switch shape {
	case shapeSyntax:
		var syn *json.SyntaxError
		err := json.Unmarshal(body, new(any))
		offset := int64(len(body))
		if errors.As(err, &syn) {
			offset = syn.Offset
		}
		vs.addResponse("response.body.syntax", fmt.Sprintf("the broker's %s answer to %s is not valid JSON at byte %d: %v",
			describeStatus(status), c.Endpoint.describe(), offset, err))
		return false
	case shapeEmpty, shapeNotObject:
		vs.addResponse("response.body.not_object", fmt.Sprintf("the broker's %s answer to %s must be a JSON object, got %s",
			describeStatus(status), c.Endpoint.describe(), valueKindOf(body)))
		return false
	}
	return true
}

// checkErrorBody checks an error answer: "error" and "description" are
// strings, the code is the one the status needs, and AsyncRequired does not
// answer a request that accepted asynchronous operations.
func checkErrorBody(c Call, v osb.Version, status int, row *statusRow, body []byte, fields jsonfast.Object, vs *violationList) {
	var code string
	for _, name := range [...]string{"error", "description"} {
		raw, ok := fields.Get(body, name)
		if !ok || isNull(raw) {
			continue
		}
		rule := "response.error.type"
		if name == "description" {
			rule = "response.error.description"
		}
		if typeOf(raw) != typeString {
			vs.addResponse(rule, fmt.Sprintf("%q in the broker's error body must be a string, got %s", name, valueKindOf(raw)))
			continue
		}
		s := jsonfast.Unquote(bytes.TrimSpace(raw))
		if s == "" && v.AtLeast(nonEmptySince) {
			vs.addResponse(rule, fmt.Sprintf("%q in the broker's error body must be a non-empty string when present (OSB 2.12 and later), got \"\"", name))
		}
		if name == "error" {
			code = s
		}
	}
	if row != nil && len(row.codes) > 0 && !slices.Contains(row.codes, code) {
		vs.addResponse("response.error.code", fmt.Sprintf("the broker's %s answer to %s must have \"error\": %s, got %s",
			describeStatus(status), c.Endpoint.describe(), quoteCut(row.codes[0]), errorCodeWords(code)))
	}
	if status == http.StatusUnprocessableEntity && code == osb.CodeAsyncRequired && c.AcceptsIncomplete {
		vs.addResponse("response.error.async_required", fmt.Sprintf(
			"the broker answered 422 AsyncRequired to %s, but AsyncRequired answers only requests without accepts_incomplete=true, and this one had it", c.Endpoint.describe()))
	}
}

// errorCodeWords describes the error code a body had.
func errorCodeWords(code string) string {
	if code == "" {
		return "none"
	}
	return quoteCut(code)
}
