package catalog

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// What the gateway did with a call that needed the broker's catalog when
// none could be had, as Scope.CatalogUnavailable and the
// osb_gateway_catalog_unavailable_total metric name it.
const (
	// CatalogRefused: the call got 503 and was not forwarded.
	CatalogRefused = core.CatalogRefused
	// CatalogForwarded: the call was forwarded without the catalog checks
	// (brokers[].validation.without_catalog: forward).
	CatalogForwarded = core.CatalogForwarded
)

// RuleCatalogUnavailable is the finding recorded on a call forwarded
// without the catalog checks.
const RuleCatalogUnavailable = "request.catalog.unavailable"

// NeedsCatalog reports whether a mutating call cannot be judged without
// the broker's catalog: every one on a route with services or plans
// filters (the gateway must tell whether the tenant may use the service
// and plan), and those the request rules check against the catalog when
// request validation is not off. Without either, nothing is fetched.
func NeedsCatalog(s *core.Scope) bool {
	if upstream.Of(s.Route).Cfg.Retired.Gone() && (s.Call.Endpoint == rules.Deprovision || s.Call.Endpoint == rules.Unbind) {
		return false // answered by the gateway, whatever the catalog (proxy/internal/routes/retire.go)
	}
	if FilterOf(s.Route) != nil {
		return true
	}
	return upstream.Of(s.Route).Cfg.Validation.Requests != config.ModeOff && s.Call.Endpoint.ChecksCatalog()
}

// WithoutCatalog decides a call that needs the catalog (needsCatalog)
// when cause says why none can be had. It returns the 503 to refuse the
// call with, or nil to forward it unchecked, and records the decision in
// s; when the broker refuses the call's version, that refusal (see
// versionRefusal), as the broker answers it. A route with filters always refuses: forwarding would let the tenant
// reach what its filters hide. Otherwise the broker's
// validation.without_catalog decides.
func WithoutCatalog(s *core.Scope, cause error) error {
	var refusal *VersionRefusal
	if errors.As(cause, &refusal) {
		return refusal // the broker's answer at this version, whatever the route and mode
	}
	why := upstream.Said(cause)
	var oe *osb.Error
	var hdr http.Header
	if errors.As(cause, &oe) {
		why, hdr = oe.Description, oe.Header
	}
	if FilterOf(s.Route) != nil {
		s.CatalogUnavailable = CatalogRefused
		return &osb.Error{Status: http.StatusServiceUnavailable, Err: cause, Header: hdr, Description: fmt.Sprintf(
			"the %s was not forwarded: the route of tenant %q to broker %q has services or plans filters, and without the broker's catalog the gateway cannot tell whether they let this call through; %s",
			s.Call.Endpoint, s.Tenant, s.Broker, why)}
	}
	if upstream.Of(s.Route).Cfg.Validation.WithoutCatalog == config.WithoutCatalogForward {
		s.CatalogUnavailable = CatalogForwarded
		s.Findings = append(s.Findings, core.Finding{Direction: "request", Violation: rules.Violation{
			Rule: RuleCatalogUnavailable, Status: http.StatusServiceUnavailable,
			Description: fmt.Sprintf("the %s was forwarded without the checks against broker %q's catalog (brokers[].validation.without_catalog: forward): %s",
				s.Call.Endpoint, s.Broker, why)}})
		return nil
	}
	s.CatalogUnavailable = CatalogRefused
	return &osb.Error{Status: http.StatusServiceUnavailable, Err: cause, Header: hdr, Description: fmt.Sprintf(
		"the %s was not forwarded: it is checked against broker %q's catalog before it may reach the broker (brokers[].validation.without_catalog: refuse); %s",
		s.Call.Endpoint, s.Broker, why)}
}

// withoutCatalogLog says, for the log line of a failed catalog fetch, what
// the broker's calls get while no catalog can be had.
func withoutCatalogLog(v config.Validation) string {
	switch {
	case v.Requests == config.ModeOff:
		return "mutating calls are refused on routes with services or plans filters, forwarded on others (validation.requests: off)"
	case v.WithoutCatalog == config.WithoutCatalogForward:
		return "mutating calls are refused on routes with services or plans filters; provisions, updates and binds on others are forwarded unchecked (validation.without_catalog: forward)"
	}
	return "mutating calls are refused on routes with services or plans filters; provisions, updates and binds on others are refused too (validation.without_catalog: refuse)"
}
