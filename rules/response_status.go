package rules

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// statusCond is a condition under which a status is a valid answer.
type statusCond uint8

const (
	// statusAlways: the status needs nothing beyond the version.
	statusAlways statusCond = iota
	// statusWhenAsync: the request had accepts_incomplete=true.
	statusWhenAsync
	// statusWhenPollingDelete: the polled operation is a deprovision or an unbind
	// (or the gateway does not know which operation it is).
	statusWhenPollingDelete
)

// statusRow is one row of the specification's status table of an endpoint.
type statusRow struct {
	status int
	since  osb.Version
	cond   statusCond
	// codes, when set, are the error codes a body with this status must
	// carry in "error".
	codes []string
}

// statusTable holds, per endpoint, the statuses the specification defines,
// from the version that defines them. 4xx and 5xx statuses outside the
// table are valid too: "Broker failures beyond the scope of the
// well-defined HTTP response codes listed above should return an
// appropriate HTTP response code", in every version. So the table decides
// which 1xx, 2xx and 3xx statuses are valid, and carries the conditions and
// error codes of the statuses it lists; for a 4xx row the version is for
// the record only.
//
// 200 to provision and bind is defined for a repeat of an identical request.
// The gateway cannot know whether the request was identical, so it accepts
// 200 as the specification's own tables list it.
//
// 304 Not Modified answers a conditional catalog request (ETag and
// If-Modified-Since, OSB 2.16); the call does not say whether the request
// was conditional, so 304 passes from 2.16 on.
//
// 404 on the last_operation endpoints is defined from 2.16 (before, a
// platform polling an unknown instance got a 400 or 410). 410 on them is a
// success only for an asynchronous delete.
var statusTable = [...][]statusRow{
	Catalog: {
		{status: http.StatusOK, since: v2_0},
		{status: http.StatusNotModified, since: v2_16},
	},
	Provision: {
		{status: http.StatusOK, since: v2_0},
		{status: http.StatusCreated, since: v2_0},
		{status: http.StatusAccepted, since: v2_0, cond: statusWhenAsync},
		{status: http.StatusBadRequest, since: v2_0},
		{status: http.StatusConflict, since: v2_0},
		{status: http.StatusUnprocessableEntity, since: v2_0},
	},
	Update: {
		{status: http.StatusOK, since: v2_0},
		{status: http.StatusAccepted, since: v2_0, cond: statusWhenAsync},
		{status: http.StatusBadRequest, since: v2_0},
		{status: http.StatusUnprocessableEntity, since: v2_0},
	},
	Deprovision: {
		{status: http.StatusOK, since: v2_0},
		{status: http.StatusAccepted, since: v2_0, cond: statusWhenAsync},
		{status: http.StatusBadRequest, since: v2_0},
		{status: http.StatusGone, since: v2_0},
		{status: http.StatusUnprocessableEntity, since: v2_0},
	},
	GetInstance: {
		{status: http.StatusOK, since: v2_14},
		{status: http.StatusNotFound, since: v2_14},
		{status: http.StatusUnprocessableEntity, since: v2_14, codes: []string{osb.CodeConcurrencyError}},
	},
	InstanceLastOperation: {
		{status: http.StatusOK, since: v2_0},
		{status: http.StatusBadRequest, since: v2_0},
		{status: http.StatusNotFound, since: v2_16},
		{status: http.StatusGone, since: v2_0, cond: statusWhenPollingDelete},
	},
	Bind: {
		{status: http.StatusOK, since: v2_0},
		{status: http.StatusCreated, since: v2_0},
		{status: http.StatusAccepted, since: v2_14, cond: statusWhenAsync},
		{status: http.StatusBadRequest, since: v2_0},
		{status: http.StatusConflict, since: v2_0},
		{status: http.StatusUnprocessableEntity, since: v2_0},
	},
	Unbind: {
		{status: http.StatusOK, since: v2_0},
		{status: http.StatusAccepted, since: v2_14, cond: statusWhenAsync},
		{status: http.StatusBadRequest, since: v2_0},
		{status: http.StatusGone, since: v2_0},
		{status: http.StatusUnprocessableEntity, since: v2_14},
	},
	GetBinding: {
		{status: http.StatusOK, since: v2_14},
		{status: http.StatusNotFound, since: v2_14},
		{status: http.StatusUnprocessableEntity, since: v2_16},
	},
	BindingLastOperation: {
		{status: http.StatusOK, since: v2_14},
		{status: http.StatusBadRequest, since: v2_14},
		{status: http.StatusNotFound, since: v2_16},
		{status: http.StatusGone, since: v2_14, cond: statusWhenPollingDelete},
	},
}

// statusRowFor returns the row of e's table for status at version v, or nil.
func statusRowFor(e Endpoint, v osb.Version, status int) *statusRow {
	if int(e) >= len(statusTable) {
		return nil
	}
	for i := range statusTable[e] {
		r := &statusTable[e][i]
		if r.status == status && v.AtLeast(r.since) {
			return r
		}
	}
	return nil
}

// isErrorStatus reports whether status is a 4xx or 5xx, which a broker may
// answer with on any endpoint.
func isErrorStatus(status int) bool { return status >= 400 && status <= 599 }

// checkStatus checks the status against e's table and its conditions. It
// returns the matching row, or nil.
func checkStatus(c Call, v osb.Version, status int, opts ResponseOptions, vs *violationList) *statusRow {
	row := statusRowFor(c.Endpoint, v, status)
	switch {
	case row == nil && isErrorStatus(status):
		return nil
	case row == nil:
		vs.addResponse("response.status.unexpected", fmt.Sprintf(
			"the broker answered %s to %s, but at API version %s the specification allows %s",
			describeStatus(status), c.Endpoint.describe(), v, allowedStatuses(c.Endpoint, v)))
		return nil
	case row.cond == statusWhenAsync && !c.AcceptsIncomplete:
		vs.addResponse("response.status.not_async", fmt.Sprintf(
			"the broker answered %s to %s, but only a request with accepts_incomplete=true may get an asynchronous answer, "+
				"and this one did not have it", describeStatus(status), c.Endpoint.describe()))
	case row.cond == statusWhenPollingDelete && opts.Polled != Unknown && opts.Polled != Deprovision && opts.Polled != Unbind:
		vs.addResponse("response.last_operation.gone", fmt.Sprintf(
			"the broker answered %s to %s while the platform polls a %s, but 410 is a valid answer only for a deprovision or unbind",
			describeStatus(status), c.Endpoint.describe(), opts.Polled))
	}
	return row
}

// allowedStatuses lists, for a description, the statuses e's table allows
// at v with their conditions, then the error statuses any endpoint may use.
func allowedStatuses(e Endpoint, v osb.Version) string {
	var parts []string
	for _, r := range statusTable[e] {
		if isErrorStatus(r.status) || v.Less(r.since) {
			continue
		}
		s := strconv.Itoa(r.status)
		switch r.cond {
		case statusAlways: // nothing to add
		case statusWhenAsync:
			s += " (with accepts_incomplete=true)"
		case statusWhenPollingDelete:
			s += " (for a delete)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ") + " or an error status (4xx, 5xx)"
}

// describeStatus formats a status for descriptions: "201 Created".
func describeStatus(status int) string {
	if t := http.StatusText(status); t != "" {
		return strconv.Itoa(status) + " " + t
	}
	return strconv.Itoa(status)
}
