package samplebroker

// Serving a request: the control endpoints, or credentials, faults, the API
// version and then the OSB endpoint's handler.

import (
	"net/http"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Canonical header keys, to index http.Header maps without canonicalizing on
// every request.
var (
	keyVersion         = http.CanonicalHeaderKey(osb.HeaderAPIVersion)
	keyRequestIdentity = http.CanonicalHeaderKey(osb.HeaderRequestIdentity)
	jsonContentType    = []string{"application/json"}
	basicChallenge     = []string{`Basic realm="osb-sample-broker"`}
)

// call is one routed /v2 request.
type call struct {
	ep         endpoint
	instanceID string
	bindingID  string
	version    osb.Version
	now        time.Time
	failOp     bool // an injected fault asks the async operation to fail
}

// ServeHTTP routes /v2 requests to the OSB endpoints and /_sample/ requests
// to the control endpoints; anything else is a 404 OSB error.
func (b *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, ControlPrefix) {
		if b.authorized(r) {
			b.serveControl(w, r)
		} else {
			b.unauthorized(w)
		}
		return
	}
	if !b.opts.Legacy {
		if id := r.Header[keyRequestIdentity]; len(id) > 0 {
			w.Header()[keyRequestIdentity] = id
		}
	}
	ep, instanceID, bindingID, allow := route(r.Method, r.URL.Path)
	c := call{ep: ep, instanceID: instanceID, bindingID: bindingID}
	b.counts[c.ep].Add(1)
	if b.opts.Latency > 0 && !b.sleep(r, b.opts.Latency) {
		return
	}
	if !b.authorized(r) {
		b.unauthorized(w)
		return
	}
	if b.calls != nil && c.ep.mutating() {
		b.serveLogged(w, r, c, allow)
		return
	}
	b.serveAuthorized(w, r, c, allow)
}

// serveAuthorized serves an authenticated /v2 request: faults, then the
// endpoint.
func (b *Broker) serveAuthorized(w http.ResponseWriter, r *http.Request, c call, allow string) {
	if b.nFaults.Load() > 0 {
		var handled bool
		if handled, c.failOp = b.applyFault(w, r, c.ep); handled {
			return
		}
	}
	switch {
	case c.ep == epUnknown && allow != "":
		osb.WriteError(w, methodNotAllowed(w, r, allow))
		return
	case c.ep == epUnknown || b.opts.Legacy && c.ep.since214():
		osb.WriteError(w, osb.Errorf(http.StatusNotFound, "", "no endpoint %s %s", r.Method, r.URL.Path))
		return
	}
	v, err := b.checkVersion(r)
	if err != nil {
		osb.WriteError(w, err)
		return
	}
	c.version = v
	c.now = b.now()
	if err := b.dispatch(w, r, c); err != nil {
		osb.WriteError(w, err)
	}
}

// dispatch runs the endpoint's handler.
func (b *Broker) dispatch(w http.ResponseWriter, r *http.Request, c call) error {
	switch c.ep {
	case epCatalog:
		b.serveCatalog(w, r)
		return nil
	case epProvision:
		return b.provision(w, r, c)
	case epUpdate:
		return b.update(w, r, c)
	case epDeprovision:
		return b.deprovision(w, r, c)
	case epGetInstance:
		return b.getInstance(w, c)
	case epInstanceLastOperation:
		return b.instanceLastOperation(w, r, c)
	case epBind:
		return b.bind(w, r, c)
	case epUnbind:
		return b.unbind(w, r, c)
	case epGetBinding:
		return b.getBinding(w, c)
	case epBindingLastOperation:
		return b.bindingLastOperation(w, r, c)
	}
	return osb.Errorf(http.StatusNotFound, "", "no endpoint %s %s", r.Method, r.URL.Path)
}

// checkVersion parses X-Broker-API-Version and holds it against MinVersion.
func (b *Broker) checkVersion(r *http.Request) (osb.Version, error) {
	h := r.Header[keyVersion]
	if len(h) == 0 || h[0] == "" {
		return osb.Version{}, osb.Errorf(http.StatusPreconditionFailed, "",
			"%s is missing; this broker needs %s or newer", osb.HeaderAPIVersion, b.minVersion)
	}
	v, err := osb.ParseVersion(h[0])
	switch {
	case err != nil:
		return v, osb.Errorf(http.StatusPreconditionFailed, "", "%s: %v", osb.HeaderAPIVersion, err)
	case v.Major != osb.Latest.Major:
		return v, osb.Errorf(http.StatusPreconditionFailed, "",
			"%s %s has major version %d; this broker speaks %d.x", osb.HeaderAPIVersion, v, v.Major, osb.Latest.Major)
	case v.Less(b.minVersion):
		return v, osb.Errorf(http.StatusPreconditionFailed, b.opts.VersionCode,
			"%s %s is below %s, the lowest this broker accepts", osb.HeaderAPIVersion, v, b.minVersion)
	}
	return v, nil
}

// sleep waits d or until the request's context ends; it reports whether the
// full time passed.
func (b *Broker) sleep(r *http.Request, d time.Duration) bool {
	if b.opts.After != nil {
		select {
		case <-b.opts.After(d):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}
