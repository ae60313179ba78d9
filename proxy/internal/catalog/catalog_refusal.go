package catalog

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// VersionRefusal is a broker's refusal of one X-Broker-API-Version, as it
// answered GET /v2/catalog at that version (rules.RefusesVersion: 412). It
// is that version's answer, not an outage: the cache keeps it beside the
// catalogs, per broker, version and platform, for the broker's
// catalog.ttl, so that other versions are not affected; a platform at the
// version gets the broker's answer as the broker sent it (status,
// Content-Type, body byte for byte) to GET /v2/catalog, and to a call that
// needs the catalog (withoutCatalog), without a broker call: the gateway
// cannot check such a call against a catalog the broker will not give at
// that version, and forwarding it unchecked could take a tenant past its
// route's filters. A call that needs no catalog is forwarded, and the
// broker answers it itself.
type VersionRefusal struct {
	key         Key
	status      int
	contentType []string
	body        []byte
	// code and description are the body's "error" and "description",
	// read once (rules.ReadResponse), for check, the log and the admin API.
	code, Description string
	expires           time.Time
}

// newVersionRefusal is the refusal in a broker's answer with status,
// Content-Type ct and body to GET /v2/catalog at k's version, fresh until
// expires.
func newVersionRefusal(k Key, status int, ct string, body []byte, expires time.Time) *VersionRefusal {
	if ct == "" {
		ct = "application/json"
	}
	a := rules.ReadResponse(rules.Call{Endpoint: rules.Catalog}, status, body)
	return &VersionRefusal{key: k, status: status, contentType: []string{ct}, body: body,
		code: a.Code, Description: a.Description, expires: expires}
}

// Error says what the broker refused, for the log and operators:
// `broker "b" refuses X-Broker-API-Version 2.12 (412 IncompatibleAPIVersion): …`.
func (v *VersionRefusal) Error() string {
	return fmt.Sprintf("broker %q refuses X-Broker-API-Version %s (%s)%s", v.key.Broker, v.key.Version, v.Answer(), v.said())
}

// Answer is the refusal's status and code: "412 IncompatibleAPIVersion",
// or "412" when the body has no code.
func (v *VersionRefusal) Answer() string {
	s := strconv.Itoa(v.status)
	if v.code != "" {
		s += " " + v.code
	}
	return s
}

// said is ": " and the broker's description, or "" without one.
func (v *VersionRefusal) said() string {
	if v.Description == "" {
		return ""
	}
	return ": " + v.Description
}

// WriteAnswer passes the broker's refusal to the platform as the broker sent it.
func (v *VersionRefusal) WriteAnswer(w http.ResponseWriter) {
	h := w.Header()
	h["Content-Type"] = v.contentType
	h["Content-Length"] = []string{strconv.Itoa(len(v.body))}
	w.WriteHeader(v.status)
	_, _ = w.Write(v.body)
}

// refused returns the cached refusal of k, if it is fresh at now.
func (c *Cache) refused(k Key, now time.Time) *VersionRefusal {
	v, ok := c.refusals.Get(k)
	if !ok || !now.Before(v.expires) {
		return nil
	}
	return v
}

// keepRefusal caches v in place of any catalog or failure of its key.
func (c *Cache) keepRefusal(v *VersionRefusal) {
	c.Entries.Remove(v.key)
	c.failures.Remove(v.key)
	c.refusals.Add(v.key, v)
}

// A broker's refusal of a version is written as the broker's own answer
// (Scope.Fail).
var _ core.CachedAnswer = (*VersionRefusal)(nil)
