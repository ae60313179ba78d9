package rules

import (
	"bytes"
	"fmt"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Binding expiry (OSB 2.17): a bind answer and a GET binding answer may
// carry "metadata" with "expires_at", when the binding stops working, and
// "renew_before", when the platform should rotate it; both are timestamps,
// and renew_before, when expires_at is present too, is not after it.

// expirySince is the version that brought the binding's metadata.
var expirySince = v2_17

// expiryLayout is the form of the timestamps: RFC 3339, the profile of ISO
// 8601 the specification's examples use, fractional seconds allowed.
const expiryLayout = time.RFC3339

// expiryExample is a timestamp of that form, for descriptions.
const expiryExample = `"2030-01-31T23:59:59Z"`

// answersBinding reports whether a success answer to c carries a
// binding's metadata: 200 or 201 to a bind, 200 to GET binding.
func answersBinding(c Call, status int) bool {
	switch c.Endpoint {
	case Bind:
		return status == http.StatusOK || status == http.StatusCreated
	case GetBinding:
		return status == http.StatusOK
	}
	return false
}

// parseExpiry parses the timestamp member name of the metadata object:
// raw is the member's value, nil when absent or null; ok reports a
// timestamp.
func parseExpiry(meta []byte, ms jsonfast.Object, name string) (t time.Time, raw []byte, ok bool) {
	raw, found := ms.Get(meta, name)
	if !found || isNull(raw) {
		return time.Time{}, nil, false
	}
	if typeOf(raw) != typeString {
		return time.Time{}, raw, false
	}
	t, err := time.Parse(expiryLayout, jsonfast.Unquote(bytes.TrimSpace(raw)))
	return t, raw, err == nil
}

// checkExpiry checks a binding's metadata at version v: an object
// (response.metadata.type) whose expires_at and renew_before are RFC 3339
// timestamps (response.metadata.<field>.type, .format), renew_before not
// after expires_at (response.metadata.renew_before.after_expiry).
func checkExpiry(c Call, v osb.Version, status int, body []byte, fields jsonfast.Object, vs *violationList) {
	if v.Less(expirySince) || !answersBinding(c, status) {
		return
	}
	meta, ok := fields.Get(body, "metadata")
	if !ok || isNull(meta) {
		return
	}
	where := fmt.Sprintf("the broker's %s answer to %s", describeStatus(status), c.Endpoint.describe())
	if typeOf(meta) != typeObject {
		vs.addResponse("response.metadata.type", fmt.Sprintf("metadata in %s must be a JSON object, got %s", where, valueKindOf(meta)))
		return
	}
	meta = bytes.TrimSpace(meta)
	ms, _, _ := jsonfast.ObjectMembers(meta, 0)
	var at [2]time.Time
	var set [2]bool
	for i, name := range [...]string{"expires_at", "renew_before"} {
		t, raw, ok := parseExpiry(meta, ms, name)
		rule := "response.metadata." + name
		switch {
		case raw == nil:
		case typeOf(raw) != typeString:
			vs.addResponse(rule+".type", fmt.Sprintf("metadata/%s in %s must be a timestamp string such as %s, got %s",
				name, where, expiryExample, valueKindOf(raw)))
		case !ok:
			vs.addResponse(rule+".format", fmt.Sprintf("metadata/%s in %s must be an RFC 3339 timestamp such as %s, got %s",
				name, where, expiryExample, quoteCut(jsonfast.Unquote(bytes.TrimSpace(raw)))))
		default:
			at[i], set[i] = t, true
		}
	}
	if expires, renew := at[0], at[1]; set[0] && set[1] && renew.After(expires) {
		vs.addResponse("response.metadata.renew_before.after_expiry", fmt.Sprintf(
			"metadata/renew_before in %s must not be after metadata/expires_at (%s), got %s",
			where, expires.Format(time.RFC3339Nano), renew.Format(time.RFC3339Nano)))
	}
}
