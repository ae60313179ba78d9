package routes

import (
	"net/http"
	"strconv"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

var staleWarning = []string{`110 osb-gateway "Response is Stale"`}

// WithCatalog is the catalog stage: GET /v2/catalog is answered from the
// cache (filtered per tenant, with ETag and Last-Modified, and 304 for
// If-None-Match and If-Modified-Since); a provision, update or bind for a
// service or plan the tenant's filter hides gets 400 without reaching the
// broker.
func WithCatalog(cache *catalog.Cache) core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			switch s.Call.Endpoint {
			case rules.Catalog:
				serveCatalog(w, r, s, cache)
				return
			case rules.Provision, rules.Update, rules.Bind:
				if catalog.FilterOf(s.Route) != nil {
					if err := hiddenFromTenant(r, s, cache); err != nil {
						s.Fail(w, err)
						return
					}
				}
				if m := MigrationOf(s.Route); m != nil && s.Route == m.New && s.Call.Endpoint == rules.Provision {
					if err := m.CheckCatalogs(r, s, cache); err != nil {
						s.Fail(w, err)
						return
					}
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

func serveCatalog(w http.ResponseWriter, r *http.Request, s *core.Scope, cache *catalog.Cache) {
	f := catalog.FetchFor(r, s)
	e, stale, err := cache.Get(r.Context(), f)
	if err != nil && upstream.Of(s.Route).Cfg.Retired.On && !s.WentAway(r, err) {
		if kept := cache.KeptEntry(r.Context(), f); kept != nil {
			e, stale, err = kept, true, nil // catalog_retired.go
		}
	}
	if err != nil {
		if s.WentAway(r, err) {
			return
		}
		s.Fail(w, err)
		return
	}
	v, err := e.ViewFor(catalog.FilterOf(s.Route), upstream.Of(s.Route).Cfg.Emulate.Advertise)
	if err == nil && IDsOf(s.Route) != nil {
		v, err = IDsViewOf(e, v, s.Route) // routes[].ids (routeids.go)
	}
	if err != nil {
		s.Fail(w, &osb.Error{Status: http.StatusBadGateway, Err: err,
			Description: "the catalog of broker " + strconv.Quote(s.Broker) + " could not be filtered for tenant " + strconv.Quote(s.Tenant) + ": " + err.Error()})
		return
	}
	s.FromCache = true
	h := w.Header()
	h["Etag"] = v.Etag
	h["Last-Modified"] = e.LastModHdr
	if stale {
		h["Warning"] = staleWarning
	}
	if notModified(r, v.Etag[0], e.LastModified) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h["Content-Type"] = e.ContentType
	h["Content-Length"] = v.Length
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(v.Body)
}

// notModified applies RFC 9110's conditional GET: If-None-Match wins over
// If-Modified-Since.
func notModified(r *http.Request, etag string, lastModified time.Time) bool {
	if inm := core.HeaderValue(r.Header, "If-None-Match"); inm != "" {
		return catalog.EtagMatch(inm, etag)
	}
	if ims := core.HeaderValue(r.Header, "If-Modified-Since"); ims != "" {
		t, err := http.ParseTime(ims)
		return err == nil && !lastModified.After(t)
	}
	return false
}

// hiddenFromTenant refuses a call whose service or plan the tenant's
// filter hides. When the catalog cannot be had, the call is refused with
// 503 (withoutCatalog): a filtered route never forwards on a guess. The
// validate stage has usually fetched the catalog, or refused already.
func hiddenFromTenant(r *http.Request, s *core.Scope, cache *catalog.Cache) error {
	// The ids as the request rules read them, and as a broker decoding
	// with encoding/json would (keys in any case, the last duplicate
	// winning): a body that reads differently under the two must pass the
	// filter both ways, or a tenant could slip a hidden plan past it.
	var ids [2][2]string
	n := 0
	if s.Request != nil { // the validate stage decoded the body already
		ids[n] = [2]string{s.Request.ServiceID, s.Request.PlanID}
		n++
	}
	if len(s.Body) > 0 {
		svc, plan := rules.RequestIDs(s.Body)
		if n == 0 || ids[0] != [2]string{svc, plan} {
			ids[n] = [2]string{svc, plan}
			n++
		}
	}
	e := catalog.Of(s) // fetched by the validate stage, when it ran
	if e == nil {
		var err error
		if e, _, err = cache.Get(r.Context(), catalog.FetchFor(r, s)); err != nil {
			return catalog.WithoutCatalog(s, err) // refuses: the route has a filter
		}
	}
	if n == 0 {
		return catalog.CheckVisible(catalog.FilterOf(s.Route), e, s.Tenant, s.Call.ServiceID, "")
	}
	for _, id := range ids[:n] {
		serviceID := id[0]
		if serviceID == "" {
			serviceID = s.Call.ServiceID
		}
		if err := catalog.CheckVisible(catalog.FilterOf(s.Route), e, s.Tenant, serviceID, id[1]); err != nil {
			return err
		}
	}
	return nil
}
