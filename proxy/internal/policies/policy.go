package policies

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/policy"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// ProtectionPolicy: a policy (policies:, docs/policies.md) denied the call
// (core's word); OutcomeDenied is its outcome.
const (
	ProtectionPolicy = core.ProtectionPolicy
	OutcomeDenied    = core.OutcomeDenied
)

// The rule ids of the findings the policy stage records (core's); the
// audit stage reads them.
const (
	rulePolicyDenied    = core.RulePolicyDenied
	rulePolicyReported  = core.RulePolicyReported
	rulePolicyForced    = core.RulePolicyForced
	rulePolicyDefaulted = core.RulePolicyDefaulted
)

// Stage is the policy stage's state: each route's compiled policies,
// and what reloads share (the compiled programs, the recent denials).
type Stage struct {
	Routes   []*core.Route // the routes with policies: each holds its set (core.Route.Policies)
	cache    *policy.Cache
	Recent   *policyLog
	catalogs *catalog.Cache
	inv      store.Inventory
	metrics  *metrics.Metrics
	log      *slog.Logger
}

// New compiles the policies every route's calls meet and sets
// each route's set as its part (Route.Policies), so that a copy of the
// route (a migration's) carries it; the compiled programs of prev's
// policies whose spec did not change are kept. nil when no route has any.
func New(cfg *config.Config, routes map[string]*core.Route, prev *Stage, catalogs *catalog.Cache, inv store.Inventory, m *metrics.Metrics, log *slog.Logger) (*Stage, error) {
	ps := &Stage{cache: policy.NewCache(nil), Recent: &policyLog{},
		catalogs: catalogs, inv: inv, metrics: m, log: log}
	if prev != nil {
		ps.cache, ps.Recent = policy.NewCache(prev.cache), prev.Recent
	}
	for i := range cfg.Tenants {
		t := &cfg.Tenants[i]
		for j := range t.Routes {
			rc := &t.Routes[j]
			var list []*policy.Policy
			for _, spec := range cfg.PoliciesOf(t, rc) {
				p, probs := ps.cache.Compile(spec)
				if len(probs) > 0 {
					return nil, fmt.Errorf("policy %q: %s: %s", spec.Name, probs[0].Field, probs[0].Message)
				}
				list = append(list, p)
			}
			if set := policy.NewSet(list); set != nil {
				rt := routes[rc.Prefix]
				rt.Policies = set
				ps.Routes = append(ps.Routes, rt)
			}
		}
	}
	ps.cache.Done()
	if len(ps.Routes) == 0 && prev == nil {
		return nil, nil
	}
	return ps, nil
}

// withPolicy is the policy stage, after validation and before the
// catalog, flights, broker protection, quota and guard stages, so that a
// denied call takes no lock, slot or count of any kind. For a mutating
// call on a route with policies it evaluates them (internal/policy): a
// denial is a 400 naming the policy and its message; a policy in report
// mode is logged and counted; parameters the policies default or force
// are checked against the plan's schema (per validation.requests, as the
// platform's own) and replace the body's, so that the broker, the
// inventory and the emulations see them. nil (left out of the chain) when
// no route has a policy.
func With(ps *Stage) core.Middleware {
	if ps == nil || len(ps.Routes) == 0 {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			set := Of(s.Route)
			if set == nil || !s.Call.Endpoint.Mutating() {
				next.ServeHTTP(w, r)
				return
			}
			if r2, ok := ps.serve(w, r, s, set); ok {
				next.ServeHTTP(w, r2)
			}
		})
	}
}

// serve evaluates set for the call; it answers the call itself and
// returns false, or returns the request to go on with.
func (ps *Stage) serve(w http.ResponseWriter, r *http.Request, s *core.Scope, set *policy.Set) (*http.Request, bool) {
	call, err := ps.input(r, s)
	if err != nil {
		if !s.WentAway(r, err) {
			s.Fail(w, err)
		}
		return nil, false
	}
	v := set.Evaluate(&call.in, false)
	if call.storeErr != nil {
		s.Fail(w, &osb.Error{Status: http.StatusServiceUnavailable, Err: call.storeErr,
			Description: "policies apply to this call and read the instance's record, which the state store could not give; try again"})
		return nil, false
	}
	for _, d := range v.Reported {
		ps.note(r, s, d, rulePolicyReported)
	}
	if d := v.Denied; d != nil {
		ps.note(r, s, *d, rulePolicyDenied)
		desc := fmt.Sprintf("denied by policy %q: %s", d.Policy, d.Message)
		s.Protection = ProtectionPolicy
		s.Findings = append(s.Findings, core.Finding{Direction: "policy", Violation: rules.Violation{
			Rule: rulePolicyDenied, Status: http.StatusBadRequest, Code: d.Policy, Description: desc}})
		s.Fail(w, &policyDenial{err: &osb.Error{Status: http.StatusBadRequest, Description: desc}, policy: d.Policy})
		return nil, false
	}
	if v.Parameters == nil {
		return r, true
	}
	return ps.setParameters(w, r, s, &call, v)
}

// setParameters checks the parameters the policies set against the plan's
// schema and puts them in the body; false: the call was refused.
func (ps *Stage) setParameters(w http.ResponseWriter, r *http.Request, s *core.Scope, call *policyCall, v policy.Verdict) (*http.Request, bool) {
	for _, c := range v.Changes {
		if c.Report {
			ps.log.LogAttrs(r.Context(), slog.LevelWarn, "policy would set a parameter", slog.String("request_id", s.RequestID),
				slog.String("policy", c.Policy), slog.String("parameter", c.Parameter), slog.String("action", c.Action))
			continue
		}
		rule := rulePolicyForced
		if c.Action == "default" {
			rule = rulePolicyDefaulted
		}
		s.Findings = append(s.Findings, core.Finding{Direction: "policy", Violation: rules.Violation{Rule: rule, Code: c.Policy, Description: c.Parameter}})
	}
	if mode := upstream.Of(s.Route).Cfg.Validation.Requests; mode != config.ModeOff && call.index != nil {
		if err := call.index.ParameterSchema(call.planID, schemaKind(s.Call.Endpoint)).Validate(v.Parameters); err != nil {
			vs := []rules.Violation{{Rule: "request.parameters.schema", Status: http.StatusBadRequest,
				Description: "parameters as the policies set them break the plan's schema: " + err.Error()}}
			s.AddFindings(ps.log, r, "request", vs, mode == config.ModeReport)
			if mode == config.ModeEnforce {
				s.RefusedByRules = true
				s.Fail(w, rules.Reject(vs))
				return nil, false
			}
		}
	}
	nb, err := policy.WithParameters(s.Body, v.Parameters)
	if err != nil {
		s.Fail(w, &osb.Error{Status: http.StatusBadRequest, Description: "policies set parameters, but " + err.Error()})
		return nil, false
	}
	if s.Request != nil {
		req := *s.Request
		req.Parameters = v.Parameters
		s.Request = &req
	}
	r2 := *r // never mutate the inbound request
	r2.Body = io.NopCloser(bytes.NewReader(nb))
	r2.ContentLength = int64(len(nb))
	s.Body = nb
	return &r2, true
}

// schemaKind is the kind of parameter schema an endpoint's parameters
// answer to.
func schemaKind(e rules.Endpoint) rules.SchemaKind {
	switch e {
	case rules.Update:
		return rules.InstanceUpdate
	case rules.Bind:
		return rules.BindingCreate
	}
	return rules.InstanceCreate
}

// note logs and counts a denial (or a report) and keeps it for the
// console.
func (ps *Stage) note(r *http.Request, s *core.Scope, d policy.Denial, rule string) {
	mode := policy.ModeEnforce
	if d.Report {
		mode = policy.ModeReport
		s.Findings = append(s.Findings, core.Finding{Direction: "policy", Violation: rules.Violation{Rule: rule, Code: d.Policy}})
		ps.log.LogAttrs(r.Context(), slog.LevelWarn, "policy would deny", slog.String("request_id", s.RequestID),
			slog.String("tenant", s.Tenant), slog.String("broker", s.Broker), slog.String("endpoint", s.Call.Endpoint.String()),
			slog.String("policy", d.Policy))
	}
	ps.metrics.PolicyDenied(s.Tenant, s.Broker, d.Policy, mode)
	ps.Recent.add(PolicyDenial{Time: s.Start, Policy: d.Policy, Report: d.Report, Tenant: s.Tenant, Broker: s.Broker,
		Endpoint: s.Call.Endpoint.String(), InstanceID: s.Call.InstanceID, BindingID: s.Call.BindingID, RequestID: s.RequestID})
}

// policyDenial is a policy's refusal: the OSB error the platform gets,
// and, for logs, only the policy's name (its message may quote parameter
// values, which logs never hold).
type policyDenial struct {
	err    *osb.Error
	policy string
}

func (e *policyDenial) Error() string { return fmt.Sprintf("denied by policy %q", e.policy) }
func (e *policyDenial) Unwrap() error { return e.err }

// errPolicyCatalog: the catalog the policies need cannot be had.
var errPolicyCatalog = errors.New("policies apply to this call and need the broker's catalog")

// policyCall is the policies' view of one call, and what reading it
// found.
type policyCall struct {
	in       policy.Input
	index    *rules.Index // nil: no catalog
	planID   string
	storeErr error // the instance record could not be read
}

// input builds what the policies see of the call.
func (ps *Stage) input(r *http.Request, s *core.Scope) (policyCall, error) {
	c := policyCall{in: policy.Input{Endpoint: s.Call.Endpoint.String(), Broker: s.Broker, Tenant: s.Tenant,
		Username: s.Username(), InstanceID: s.Call.InstanceID, BindingID: s.Call.BindingID,
		Identity: core.HeaderValue(r.Header, core.HeaderOriginatingIdentity), Body: s.Body, Now: s.Start}}
	if s.Catalog == nil {
		e, _, err := ps.catalogs.Get(r.Context(), catalog.FetchFor(r, s))
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return c, err
			}
			return c, &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
				Description: fmt.Sprintf("%v, which cannot be had: %s", errPolicyCatalog, upstream.Said(err))}
		}
		s.Catalog = e
	}
	c.index = s.Catalog.Index()
	serviceID, planID := s.ServiceAndPlan()
	req := s.Request
	if req == nil && len(s.Body) > 0 { // validation.requests: off
		req, _ = rules.CheckRequest(s.Call, s.Version, s.Body, nil)
	}
	if req != nil && req.PreviousValues != nil {
		serviceID, planID = orElse(serviceID, req.PreviousValues.ServiceID), orElse(planID, req.PreviousValues.PlanID)
	}
	if s.Call.Endpoint != rules.Provision {
		c.in.Instance = ps.instance(r.Context(), s, &c)
		if planID == "" || serviceID == "" {
			if in := c.in.Instance(); in != nil {
				serviceID, planID = orElse(serviceID, in.Service.ID), orElse(planID, in.Plan.ID)
			}
		}
	}
	c.planID = planID
	c.in.Service, c.in.Plan = offerings(c.index, serviceID, planID)
	return c, nil
}

// instance returns the lookup of the call's instance record, made once.
func (ps *Stage) instance(ctx context.Context, s *core.Scope, c *policyCall) func() *policy.Instance {
	var done bool
	var out *policy.Instance
	return func() *policy.Instance {
		if done {
			return out
		}
		done = true
		rec, err := ps.inv.GetInstance(ctx, s.Broker, s.Call.InstanceID)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				c.storeErr = err
			}
			return nil
		}
		svc, plan := offerings(c.index, rec.ServiceID, rec.PlanID)
		out = &policy.Instance{Tenant: rec.Tenant, Service: svc, Plan: plan, Context: rec.Context, Created: rec.Created}
		return out
	}
}

// offerings are the service and plan with their catalog names, ids alone
// when the catalog does not have them.
func offerings(ix *rules.Index, serviceID, planID string) (svc, plan policy.Offering) {
	svc.ID, plan.ID = serviceID, planID
	if ix == nil {
		return svc, plan
	}
	if sv, p, err := ix.Plan(serviceID, planID); err == nil {
		plan = policy.Offering{ID: p.ID, Name: p.Name, Metadata: p.Metadata, Free: p.Free}
		svc = policy.Offering{ID: sv.ID, Name: sv.Name, Metadata: sv.Metadata}
	} else if sv := ix.Service(serviceID); sv != nil {
		svc = policy.Offering{ID: sv.ID, Name: sv.Name, Metadata: sv.Metadata}
	}
	return svc, plan
}

// orElse is a, or b when a is empty.
func orElse(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// policiesOf is the route's policies (Route.Policies); nil: none.
func Of(rt *core.Route) *policy.Set { p, _ := rt.Policies.(*policy.Set); return p }

// maxPolicyDenials is how many denials the console shows.
const maxPolicyDenials = 100

// policyLog keeps the latest denials for the console; safe for concurrent
// use.
type policyLog struct {
	mu   sync.Mutex
	ring [maxPolicyDenials]PolicyDenial
	n    int
}

// add keeps d.
func (l *policyLog) add(d PolicyDenial) {
	l.mu.Lock()
	l.ring[l.n%maxPolicyDenials] = d
	l.n++
	l.mu.Unlock()
}

// latest returns the denials kept, newest first.
func (l *policyLog) Latest() []PolicyDenial {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := min(l.n, maxPolicyDenials)
	out := make([]PolicyDenial, 0, k)
	for i := 1; i <= k; i++ {
		out = append(out, l.ring[(l.n-i)%maxPolicyDenials])
	}
	return out
}

// PolicyDenial is a call a policy denied (or, Report, would have).
type PolicyDenial struct {
	Time                             time.Time
	Policy                           string
	Report                           bool
	Tenant, Broker, Endpoint         string
	InstanceID, BindingID, RequestID string
}
