package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// maxReconcileBody bounds the JSON body of a reconcile.
const maxReconcileBody = 16 << 10

// reconcileBody is the JSON body of POST .../reconcile: {} polls the
// broker; a state forces it.
type reconcileBody struct {
	State       string `json:"state"`
	Description string `json:"description"`
	Release     bool   `json:"release"`
	Force       bool   `json:"force"`
}

// mountReconcile adds the reconcile routes (mountOperations):
//
//	POST /admin/operations/{broker}/{instance}/reconcile            reconcile an instance's operation
//	POST /admin/operations/{broker}/{instance}/{binding}/reconcile  reconcile a binding's operation
//
// with the JSON body {} (poll the broker's last_operation and settle the
// lock by its answer) or {"state":"succeeded"|"failed","description":"…"}
// (force the state the platform's next poll reads; "release": true
// releases the lock at once); "force": true acts on a lock that is no
// async operation. The answer is the proxy.ReconcileResult; the caller (its
// X-Operator header and address) is who the audit record names.
func (a *Admin) mountReconcile() {
	a.handle("POST /admin/operations/{broker}/{instance}/reconcile", reconcileOperation)
	a.handle("POST /admin/operations/{broker}/{instance}/{binding}/reconcile", reconcileOperation)
}

func reconcileOperation(r *http.Request, v *proxy.View) (any, string, error) {
	var b reconcileBody
	if err := decodeReconcileBody(r, &b); err != nil {
		return nil, "", err
	}
	req := proxy.ReconcileRequest{Broker: r.PathValue("broker"), InstanceID: r.PathValue("instance"), BindingID: r.PathValue("binding"),
		State: b.State, Description: b.Description, Release: b.Release, Force: b.Force, Who: operator(r)}
	res, err := v.Reconcile(r.Context(), req)
	if err != nil {
		return nil, "", err
	}
	did := fmt.Sprintf("reconciled: %s (%s)", res.Outcome, res.Answer)
	return res, did, nil
}

// decodeReconcileBody reads r's JSON body into b: one object, no unknown
// member; an empty body is {}.
func decodeReconcileBody(r *http.Request, b *reconcileBody) error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxReconcileBody+1))
	switch {
	case err != nil:
		return osb.Errorf(http.StatusBadRequest, "", "the body could not be read: %v", err)
	case len(raw) > maxReconcileBody:
		return osb.Errorf(http.StatusRequestEntityTooLarge, "", "a reconcile body is at most %d bytes: got more", maxReconcileBody)
	case len(bytes.TrimSpace(raw)) == 0:
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(b); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		what := "the body is not JSON"
		switch {
		case errors.As(err, &typ):
			what = fmt.Sprintf("member %q is a %s, not a %s", typ.Field, typ.Value, typ.Type)
		case errors.As(err, &syn):
		default:
			what = err.Error() // json: unknown field "x"
		}
		return osb.Errorf(http.StatusBadRequest, "", `expected {} or {"state":"succeeded"|"failed","description":"…"}: %s`, what)
	}
	if dec.More() {
		return osb.Errorf(http.StatusBadRequest, "", `expected one JSON object, {} or {"state":"succeeded"|"failed","description":"…"}: got more after it`)
	}
	return nil
}
