package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/rules"
)

// quotaLockKind is the store.Lock.Kind of a quota's lock: a provision's,
// which is what holds it (the store knows no other kinds). Its Broker
// names no upstream, so the sweep's orphan decisions and the reconciler
// pass it by.
const quotaLockKind = store.KindProvision

// quotaStatus is what a provision over a quota gets: a 4xx, so that Cloud
// Controller shows the description to the user and mitigates nothing.
const quotaStatus = http.StatusUnprocessableEntity

// quotaWaitMax is the longest pause between two tries for a quota's lock
// that another replica holds.
const quotaWaitMax = 20 * time.Millisecond

// quotaRule is one configured quota as the stage applies it.
type quotaRule struct {
	tenant, label string
	service, plan string   // name or id; empty: any
	max           int      // max_instances
	brokers       []string // the brokers whose instances count
	// lock is the store lock (Key, Broker, InstanceID) that serialises the
	// count and the provision across replicas; its Broker is
	// "quota:<tenant>", which no broker name can be, so it never meets a
	// platform call's lock. local serialises this replica's contenders
	// first, so that only one of them polls the store.
	lock  store.Lock
	local chan struct{}
}

// quotaRules maps each route prefix to the quotas its provisions pass:
// the tenant's (in order), then the route's own.
func quotaRules(cfg *config.Config) map[string][]*quotaRule {
	out := map[string][]*quotaRule{}
	for i := range cfg.Tenants {
		tc := &cfg.Tenants[i]
		var all []string
		for _, rc := range tc.Routes {
			all = append(all, rc.Brokers()...)
		}
		tenantRules := make([]*quotaRule, 0, len(tc.Quotas))
		for _, q := range tc.Quotas {
			tenantRules = append(tenantRules, newQuotaRule(tc.Name, q.Label(), q, all))
		}
		for _, rc := range tc.Routes {
			rs := append([]*quotaRule(nil), tenantRules...)
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

func newQuotaRule(tenant, label string, q config.Quota, brokers []string) *quotaRule {
	// The label escaped: its "/" would make the key read as a binding's.
	lb, id := "quota:"+tenant, url.PathEscape(label)
	return &quotaRule{tenant: tenant, label: label, service: q.Service, plan: q.Plan, max: q.Max(), brokers: brokers,
		lock:  store.Lock{Key: store.LockKey(lb, id), Kind: quotaLockKind, Tenant: tenant, Broker: lb, InstanceID: id},
		local: make(chan struct{}, 1)}
}

// matches reports whether an instance of serviceID and planID counts
// against q: each of q's service and plan, when set, is the id or, in the
// catalog ix (nil: ids only), the name.
func (q *quotaRule) matches(ix *rules.Index, serviceID, planID string) bool {
	if q.service != "" && serviceID != q.service {
		if ix == nil {
			return false
		}
		if svc := ix.Service(serviceID); svc == nil || svc.Name != q.service {
			return false
		}
	}
	if q.plan != "" && planID != q.plan {
		if ix == nil {
			return false
		}
		if _, p := ix.PlanByID(planID); p == nil || p.Name != q.plan {
			return false
		}
	}
	return true
}

// withQuota is the quota stage (tenants[].quotas, routes[].quotas), just
// before the guard, so that a provision takes its quotas' locks before its
// instance's (always in that order: no two calls wait on each other), and
// a store that is down is met here first. For each quota
// the provision counts against, the stage takes the quota's own lock (a
// store lock keyed on the quota, so that provisions of different instance
// ids, on any replica, take turns), counts the tenant's matching instances
// in the inventory, refuses the provision (422 naming the quota) when the
// count is at the maximum, and otherwise forwards it and holds the quota's
// lock until the answer was settled, which records a new instance in the
// inventory: the next provision's count sees it. A store that cannot be
// read gets the platform a 503 and the broker nothing. A repeat of a
// provision the inventory holds is no new instance and passes. nil when no
// tenant has quotas.
func withQuota(cfg *config.Config, g *guard, m *Metrics) Middleware {
	byPrefix := quotaRules(cfg)
	if len(byPrefix) == 0 {
		return nil
	}
	m.quotaStart(byPrefix)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			if s.Call.Endpoint != rules.Provision {
				next.ServeHTTP(w, r)
				return
			}
			qs := byPrefix[s.route.prefix]
			if len(qs) == 0 {
				next.ServeHTTP(w, r)
				return
			}
			qc := &quotaCall{g: g, m: m, s: s}
			if !qc.admit(w, r, qs) {
				return
			}
			if len(qc.held) == 0 {
				next.ServeHTTP(w, r)
				return
			}
			hand := &quotaHandoff{qc: qc}
			defer func() {
				if !hand.taken.Load() {
					qc.release()
				}
			}()
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), quotaHandoffKey{}, hand)))
			if !hand.taken.Load() {
				qc.counted(s.Status)
			}
		})
	}
}

// quotaHandoff lets the async shim take a provision's quota locks over
// when it answers 202 while the broker call runs on: the locks are then
// released when that call ends and its inventory record is written, not
// with the 202, so that the next provision's count sees the instance.
type quotaHandoff struct {
	qc    *quotaCall
	taken atomic.Bool
}

type quotaHandoffKey struct{}

// quotaHandoffOf is the handoff of r's provision; nil without quotas.
func quotaHandoffOf(ctx context.Context) *quotaHandoff {
	h, _ := ctx.Value(quotaHandoffKey{}).(*quotaHandoff)
	return h
}

// end counts and releases what the shim took over, once its broker call
// ended with status.
func (h *quotaHandoff) end(status int) {
	h.qc.counted(status)
	h.qc.release()
}

// quotaCall is one provision passing the quota stage.
type quotaCall struct {
	g    *guard
	m    *Metrics
	s    *Scope
	held []*quotaRule
	used []int // the count of each held quota, before this provision
}

// admit takes the lock of every quota the provision counts against and
// checks each count, in configuration order (the tenant's, then the
// route's: the same order for every provision, so two never wait on each
// other). It answers the platform and returns false when the provision
// may not go on; the locks taken are then released.
func (qc *quotaCall) admit(w http.ResponseWriter, r *http.Request, qs []*quotaRule) bool {
	s := qc.s
	u := s.route.up
	req := s.Request
	if req == nil && len(s.Body) > 0 { // validation.requests: off
		req, _ = rules.CheckRequest(s.Call, s.Version, s.Body, nil)
	}
	if req == nil {
		return true // no body to count by: the request rules refuse it, or the broker does
	}
	var ix *rules.Index
	if s.catalog != nil {
		ix = s.catalog.index
	}
	ctx, cancel := context.WithTimeout(r.Context(), u.timeout)
	defer cancel()
	if _, err := qc.g.st.GetInstance(ctx, u.name, s.Call.InstanceID); err == nil {
		return true // a repeat: no new instance
	} else if !errors.Is(err, store.ErrNotFound) {
		qc.unavailable(w, r, err)
		return false
	}
	for _, q := range qs {
		if !q.matches(ix, req.ServiceID, req.PlanID) {
			continue
		}
		if err := qc.lock(ctx, q); err != nil {
			qc.release()
			qc.unavailable(w, r, err)
			return false
		}
		n, err := qc.count(ctx, q, ix)
		if err != nil {
			qc.release()
			qc.unavailable(w, r, err)
			return false
		}
		qc.m.quotaSet(q, n)
		qc.used[len(qc.used)-1] = n
		if n >= q.max {
			qc.release()
			s.fail(w, quotaRefusal(q, n))
			return false
		}
	}
	return true
}

// quotaRefusal says which quota the provision would exceed, what it
// admits, and what the tenant holds.
func quotaRefusal(q *quotaRule, n int) *osb.Error {
	what := "service instances"
	switch {
	case q.service != "" && q.plan != "":
		what = fmt.Sprintf("instances of service %q, plan %q", q.service, q.plan)
	case q.service != "":
		what = fmt.Sprintf("instances of service %q", q.service)
	case q.plan != "":
		what = fmt.Sprintf("instances of plan %q", q.plan)
	}
	return &osb.Error{Status: quotaStatus, Description: fmt.Sprintf(
		"quota %q of tenant %q is reached: it admits %d %s and the tenant holds %d; delete one first, or ask the operator to raise the quota",
		q.label, q.tenant, q.max, what, n)}
}

// lock takes q's lock: this replica's turn first, then the store's, which
// another replica may hold (tried again, with pauses up to quotaWaitMax,
// until ctx ends).
func (qc *quotaCall) lock(ctx context.Context, q *quotaRule) error {
	select {
	case q.local <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting for quota %q: %w", q.label, ctx.Err())
	}
	l := q.lock
	now := qc.g.now()
	l.Owner, l.Started, l.Deadline = newRequestID(), now, now.Add(qc.s.route.up.timeout+syncHoldMargin)
	wait := time.Millisecond
	for {
		_, err := qc.g.st.Acquire(ctx, l)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrHeld) {
			<-q.local
			// No answer is not a no: the store may still take it; the
			// retry queue releases it once the store answers.
			qc.g.retry.add(pending{lock: l, unconfirmed: true, cause: err})
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			<-q.local
			return fmt.Errorf("waiting for quota %q held by another replica: %w", q.label, ctx.Err())
		}
		wait = min(2*wait, quotaWaitMax)
	}
	qc.held = append(qc.held, &quotaRule{tenant: q.tenant, label: q.label, lock: l, local: q.local, max: q.max})
	qc.used = append(qc.used, 0)
	return nil
}

// release gives back every quota lock held, last first.
func (qc *quotaCall) release() {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	for i := len(qc.held) - 1; i >= 0; i-- {
		h := qc.held[i]
		qc.g.release(ctx, h.lock)
		<-h.local
	}
	qc.held = nil
}

// count is how many of the tenant's instances count against q, read from
// the inventory: the store's counters for a quota on every service and
// plan, else the tenant's instances listed (stopping once the maximum is
// reached).
func (qc *quotaCall) count(ctx context.Context, q *quotaRule, ix *rules.Index) (int, error) {
	n := 0
	for _, b := range q.brokers {
		f := store.InstanceFilter{Broker: b, Tenant: q.tenant}
		if q.service == "" && q.plan == "" {
			c, err := qc.g.st.CountInstances(ctx, f)
			if err != nil {
				return 0, err
			}
			n += c
			continue
		}
		for cursor := ""; ; {
			page, next, err := qc.g.st.ListInstances(ctx, f, cursor, store.MaxListLimit)
			if err != nil {
				return 0, err
			}
			for _, in := range page {
				if q.matches(ix, in.ServiceID, in.PlanID) {
					n++
				}
			}
			if next == "" || n >= q.max {
				break
			}
			cursor = next
		}
	}
	return n, nil
}

// counted updates the quotas' metric after the provision's answer: one
// more instance when it succeeded or was accepted.
func (qc *quotaCall) counted(status int) {
	if status != http.StatusCreated && status != http.StatusOK && status != http.StatusAccepted {
		return
	}
	for i, h := range qc.held {
		qc.m.quotaSet(h, qc.used[i]+1)
	}
}

// unavailable answers 503 when the inventory or the quota's lock could not
// be had: the provision does not reach the broker.
func (qc *quotaCall) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	u := qc.s.route.up
	qc.g.metrics.StoreError("quota")
	qc.g.log.LogAttrs(r.Context(), slog.LevelError, "quota not counted", slog.String("broker", u.name),
		slog.String("tenant", qc.s.Tenant), slog.String("error", err.Error()))
	qc.s.fail(w, &osb.Error{Status: http.StatusServiceUnavailable, Err: err, Description: "the gateway cannot count tenant " +
		strconv.Quote(qc.s.Tenant) + "'s instances against its quotas (its state store is unavailable), so it does not forward the provision; try again later"})
}

func newQuotaGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "osb_gateway_quota_used",
		Help: "Service instances counted against each quota, by tenant and quota, as of the latest provision that counted them."},
		[]string{"tenant", "quota"})
}

// quotaStart shows every quota's series from the start, at 0 until a
// provision counts it.
func (m *Metrics) quotaStart(byPrefix map[string][]*quotaRule) {
	if m == nil {
		return
	}
	for _, qs := range byPrefix {
		for _, q := range qs {
			m.quotaUsed.WithLabelValues(q.tenant, q.label)
		}
	}
}

// quotaSet records n instances counted against q.
func (m *Metrics) quotaSet(q *quotaRule, n int) {
	if m == nil {
		return
	}
	m.quotaUsed.WithLabelValues(q.tenant, q.label).Set(float64(n))
}
