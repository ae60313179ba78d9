package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// quotaLockKind is the store.Lock.Kind of a quota's lock: a provision's,
// which is what holds it (the store knows no other kinds). Its Broker
// names no upstream, so the sweep's orphan decisions, the reconciler and
// the quotas' own count of provisions in flight pass it by.
const quotaLockKind = store.KindProvision

// quotaStatus is what a provision over a quota gets: a 4xx, so that Cloud
// Controller shows the description to the user and mitigates nothing.
const quotaStatus = http.StatusUnprocessableEntity

// Rule is one configured quota as the stage applies it.
type Rule struct {
	Tenant, Label string
	Service, Plan string   // name or id; empty: any
	Max           int      // max_instances
	Brokers       []string // the brokers whose instances count, each once
	// lock is the store lock (Key, Broker, InstanceID) that serialises the
	// counts and admissions of the quota across replicas; its Broker is
	// "quota:<tenant>", which no broker name can be, so it never meets a
	// platform call's lock. local serialises this replica's contenders
	// first, so that only one of them polls the store.
	Lock  store.Lock
	local chan struct{}
}

// Rules maps each route prefix to the quotas its provisions pass:
// the tenant's (in order), then the route's own.
func Rules(cfg *config.Config) map[string][]*Rule {
	out := map[string][]*Rule{}
	for i := range cfg.Tenants {
		tc := &cfg.Tenants[i]
		all := tenantBrokers(tc)
		tenantRules := make([]*Rule, 0, len(tc.Quotas))
		for _, q := range tc.Quotas {
			tenantRules = append(tenantRules, newQuotaRule(tc.Name, q.Label(), q, all))
		}
		for _, rc := range tc.Routes {
			rs := append([]*Rule(nil), tenantRules...)
			for _, q := range rc.Quotas {
				label := q.Label()
				if q.Name == "" {
					label = rc.Broker + ":" + label
				}
				rs = append(rs, newQuotaRule(tc.Name, label, q, rc.Brokers()))
			}
			if len(rs) > 0 {
				out[rc.Prefix] = rs
			}
		}
	}
	return out
}

// tenantBrokers is every broker the tenant's routes reach, each once, in
// the order of its first route: a broker registered twice (routes[].ids)
// holds each of its instances once, and is counted once.
func tenantBrokers(tc *config.Tenant) []string {
	var all []string
	for _, rc := range tc.Routes {
		for _, b := range rc.Brokers() {
			if !slices.Contains(all, b) {
				all = append(all, b)
			}
		}
	}
	return all
}

func newQuotaRule(tenant, label string, q config.Quota, brokers []string) *Rule {
	// The label escaped: its "/" would make the key read as a binding's.
	lb, id := "quota:"+tenant, url.PathEscape(label)
	return &Rule{Tenant: tenant, Label: label, Service: q.Service, Plan: q.Plan, Max: q.Max(), Brokers: brokers,
		Lock:  store.Lock{Key: store.LockKey(lb, id), Kind: quotaLockKind, Tenant: tenant, Broker: lb, InstanceID: id},
		local: make(chan struct{}, 1)}
}

// Matches reports whether an instance of serviceID and planID counts
// against q: each of q's service and plan, when set, is the id or, in the
// catalog ix (nil: ids only), the name.
func (q *Rule) Matches(ix *rules.Index, serviceID, planID string) bool {
	if q.Service != "" && serviceID != q.Service {
		if ix == nil {
			return false
		}
		if svc := ix.Service(serviceID); svc == nil || svc.Name != q.Service {
			return false
		}
	}
	if q.Plan != "" && planID != q.Plan {
		if ix == nil {
			return false
		}
		if _, p := ix.PlanByID(planID); p == nil || p.Name != q.Plan {
			return false
		}
	}
	return true
}

// mayMatch is matches for a provision in flight, whose lock may not name
// its service or plan (validation.requests: off): an id it lacks matches.
func (q *Rule) mayMatch(ix *rules.Index, serviceID, planID string) bool {
	if serviceID == "" {
		serviceID = q.Service
	}
	if planID == "" {
		planID = q.Plan
	}
	return q.Matches(ix, serviceID, planID)
}

// counts reports whether q counts the instances of broker.
func (q *Rule) counts(broker string) bool { return slices.Contains(q.Brokers, broker) }

// WithQuota is the quota stage (tenants[].quotas, routes[].quotas), just
// before the guard. For each quota the provision counts against, in
// configuration order (so two provisions never wait on each other), it
// takes the quota's own lock, a store lock keyed on the quota, so that
// provisions of different instance ids, on any replica, take turns. Under
// the locks it counts the tenant's matching instances (quotaCall.count):
// those the inventory records and the provisions in flight, which hold
// their operation lock or left an orphan candidate. It refuses the
// provision (422 naming the quota) when a count is at the maximum, and
// otherwise hands it to the guard, which releases the quotas' locks as
// soon as it holds the provision's own lock (the guard asks its Admitted): from then on
// that lock counts the provision on every replica, until its answer is
// settled into the inventory. So a quota's lock covers the count and the
// admission, never the broker call, and its lease is short (quotaLease):
// a replica that dies holding it blocks its tenant's provisions that long
// at most. A provision that finds the lock held by another replica waits
// quotaWait at most, then gets 429 with Retry-After; a store that does not
// answer gets the platform a 503. Either way the broker gets nothing. A
// repeat of a provision the inventory holds is no new instance and
// passes. timer starts the wait's bound (nil: a real timer). nil when no
// tenant has quotas.
func With(cfg *config.Config, g *guard.Guard, m *metrics.Metrics, timer core.Timer) core.Middleware {
	byPrefix := Rules(cfg)
	if len(byPrefix) == 0 {
		return nil
	}
	if timer == nil {
		timer = core.RealTimer
	}
	m.QuotaStart(quotaSeries(byPrefix))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			if s.Call.Endpoint != rules.Provision {
				next.ServeHTTP(w, r)
				return
			}
			qs := byPrefix[s.Route.Prefix]
			if len(qs) == 0 {
				next.ServeHTTP(w, r)
				return
			}
			qc := &quotaCall{g: g, m: m, s: s, timer: timer}
			if !qc.admit(w, r, qs) {
				return
			}
			if len(qc.held) == 0 {
				next.ServeHTTP(w, r)
				return
			}
			defer qc.release() // what the guard did not take over: it refused the call, or a panic
			next.ServeHTTP(w, r.WithContext(guard.WithAdmission(r.Context(), qc)))
			qc.counted(s.Status)
		})
	}
}

// quotaCall is one provision passing the quota stage.
type quotaCall struct {
	g      *guard.Guard
	m      *metrics.Metrics
	s      *core.Scope
	timer  core.Timer
	held   []heldQuota
	counts []quotaCount // each held quota's count, before this provision
	// waitEnds fires when this provision has waited quotaWait for quotas'
	// locks others hold (started at its first wait; nil before).
	waitEnds <-chan time.Time
	stopWait func() bool
}

// heldQuota is a quota's lock a provision holds.
type heldQuota struct {
	q    *Rule
	lock store.Lock
}

// quotaCount is what one quota counted for a provision.
type quotaCount struct {
	q                  *Rule
	recorded, inFlight int
}

// admit takes the lock of every quota the provision counts against, in
// configuration order (the tenant's, then the route's: the same order for
// every provision, so two never wait on each other), then counts each
// under them. It answers the platform and returns false when the
// provision may not go on; the locks taken are then released.
func (qc *quotaCall) admit(w http.ResponseWriter, r *http.Request, qs []*Rule) bool {
	s := qc.s
	u := upstream.Of(s.Route)
	req := s.Request
	if req == nil && len(s.Body) > 0 { // validation.requests: off
		req, _ = rules.CheckRequest(s.Call, s.Version, s.Body, nil)
	}
	if req == nil {
		return true // no body to count by: the request rules refuse it, or the broker does
	}
	var ix *rules.Index
	if s.Catalog != nil {
		ix = s.Catalog.Index()
	}
	ctx, cancel := context.WithTimeout(r.Context(), u.Timeout)
	defer cancel()
	defer qc.stopWaiting()
	if _, err := qc.g.St.GetInstance(ctx, u.Name, s.Call.InstanceID); err == nil {
		return true // a repeat: no new instance
	} else if !errors.Is(err, store.ErrNotFound) {
		qc.unavailable(w, r, err)
		return false
	}
	for _, q := range qs {
		if !q.Matches(ix, req.ServiceID, req.PlanID) {
			continue
		}
		if err := qc.lock(ctx, r, q); err != nil {
			qc.release()
			qc.refuse(w, r, err)
			return false
		}
	}
	if len(qc.held) == 0 {
		return true
	}
	flights, err := qc.flights(ctx, u.Name, s.Call.InstanceID)
	if err != nil {
		qc.release()
		qc.unavailable(w, r, err)
		return false
	}
	for _, h := range qc.held {
		c, err := qc.count(ctx, h.q, ix, flights)
		if err != nil {
			qc.release()
			qc.unavailable(w, r, err)
			return false
		}
		qc.m.QuotaSet(h.q.Tenant, h.q.Label, c.recorded+c.inFlight)
		qc.counts = append(qc.counts, c)
		if c.recorded+c.inFlight >= h.q.Max {
			qc.release()
			s.Fail(w, Refusal(h.q, c.recorded, c.inFlight))
			return false
		}
	}
	return true
}

// refuse answers a provision whose quotas' locks could not be had: the
// platform went away (nothing is sent), another provision holds one (the
// *osb.Error of lock: 429), or the store failed (503).
func (qc *quotaCall) refuse(w http.ResponseWriter, r *http.Request, err error) {
	var busy *osb.Error
	switch {
	case qc.s.WentAway(r, err):
	case errors.As(err, &busy):
		qc.s.Fail(w, busy)
	default:
		qc.unavailable(w, r, err)
	}
}

// QuotaRefusal says which quota the provision would exceed, what it
// admits, and what the tenant holds: recorded instances, and inFlight
// more that are being provisioned or not yet known to be gone.
func Refusal(q *Rule, recorded, inFlight int) *osb.Error {
	what := "service instances"
	switch {
	case q.Service != "" && q.Plan != "":
		what = fmt.Sprintf("instances of service %q, plan %q", q.Service, q.Plan)
	case q.Service != "":
		what = fmt.Sprintf("instances of service %q", q.Service)
	case q.Plan != "":
		what = fmt.Sprintf("instances of plan %q", q.Plan)
	}
	holds := strconv.Itoa(recorded + inFlight)
	if inFlight > 0 {
		holds += fmt.Sprintf(" (%d of them still being provisioned, or not yet known to be gone after a failed provision)", inFlight)
	}
	return &osb.Error{Status: quotaStatus, Description: fmt.Sprintf(
		"quota %q of tenant %q is reached: it admits %d %s and the tenant holds %s; delete one first, or ask the operator to raise the quota",
		q.Label, q.Tenant, q.Max, what, holds)}
}

// counted updates the quotas' metric after the provision's answer: one
// more instance when it succeeded or was accepted.
func (qc *quotaCall) counted(status int) {
	if status != http.StatusCreated && status != http.StatusOK && status != http.StatusAccepted {
		return
	}
	for _, c := range qc.counts {
		qc.m.QuotaSet(c.q.Tenant, c.q.Label, c.recorded+c.inFlight+1)
	}
}

// unavailable answers 503 when the inventory or the quota's lock could not
// be had because the store did not answer: the provision does not reach
// the broker.
func (qc *quotaCall) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	u := upstream.Of(qc.s.Route)
	qc.g.Metrics.StoreError("quota")
	qc.g.Log.LogAttrs(r.Context(), slog.LevelError, "quota not counted", slog.String("broker", u.Name),
		slog.String("tenant", qc.s.Tenant), slog.String("error", err.Error()))
	qc.s.Fail(w, &osb.Error{Status: http.StatusServiceUnavailable, Err: err, Description: "the gateway cannot count tenant " +
		strconv.Quote(qc.s.Tenant) + "'s instances against its quotas (its state store is unavailable), so it does not forward the provision; try again later"})
}

// quotaSeries lists the (tenant, label) pair of every quota, for the
// metrics' series shown from the start.
func quotaSeries(byPrefix map[string][]*Rule) [][2]string {
	var out [][2]string
	for _, qs := range byPrefix {
		for _, q := range qs {
			out = append(out, [2]string{q.Tenant, q.Label})
		}
	}
	return out
}
