package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/rules"
)

var osbVersion2_14 = osb.Version{Major: 2, Minor: 14}

// neverDue is the NextAttempt of an orphan the gateway will not try on its
// own: reported only, or given up on. POST /admin/orphans/{id}/retry makes
// it due.
var neverDue = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// OrphanTick is how often the background worker looks for due orphans.
const OrphanTick = 2 * time.Second

// noteOrphan records an orphan candidate for a provision or bind that may
// have left something behind, per the broker's orphan_mitigation: report
// stores and logs it, mitigate also makes it due now.
func (g *guard) noteOrphan(ctx context.Context, s *Scope, reason string) {
	up := s.route.up
	mode := up.cfg.OrphanMitigation
	if mode == "off" || s.lock == nil {
		return
	}
	l := s.lock.lock
	o := store.Orphan{ID: newRequestID(), Broker: up.name, Tenant: s.Tenant, InstanceID: l.InstanceID, BindingID: l.BindingID,
		ServiceID: l.ServiceID, PlanID: l.PlanID, Reason: reason, Created: g.now(), NextAttempt: neverDue, Kind: store.KindDeprovision}
	if s.Call.Endpoint == rules.Bind {
		o.Kind = store.KindUnbind
	}
	s.Orphan = "reported"
	if mode == "mitigate" {
		o.NextAttempt, s.Orphan = g.now(), "queued"
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := g.st.PutOrphan(ctx, o); err != nil {
		g.log.LogAttrs(ctx, slog.LevelError, "orphan candidate not recorded", slog.String("broker", up.name),
			slog.String("instance_id", o.InstanceID), slog.String("error", err.Error()))
		return
	}
	g.log.LogAttrs(ctx, slog.LevelWarn, "orphan candidate", slog.String("id", o.ID), slog.String("broker", up.name),
		slog.String("tenant", s.Tenant), slog.String("kind", o.Kind), slog.String("instance_id", o.InstanceID),
		slog.String("binding_id", o.BindingID), slog.String("reason", reason), slog.String("decision", s.Orphan))
}

// MitigateOrphans sends the deprovision or unbind of every due orphan
// once, and reschedules the ones that fail on the broker's
// orphan_schedule; after the last try it gives up and logs. Call it every
// OrphanTick.
func (g *Gateway) MitigateOrphans(ctx context.Context) {
	due, err := g.guard.st.DueOrphans(ctx, g.guard.now(), 20)
	if err != nil {
		return // the store is down; the next tick tries again
	}
	for _, o := range due {
		g.mitigate(ctx, o)
	}
}

func (g *Gateway) mitigate(ctx context.Context, o store.Orphan) {
	log := g.guard.log
	u := g.upstreams[o.Broker]
	if u == nil {
		o.NextAttempt, o.LastError = neverDue, "the broker is no longer configured"
		_ = g.guard.st.PutOrphan(ctx, o)
		return
	}
	status, err := u.undo(ctx, o)
	if err == nil && (status == http.StatusOK || status == http.StatusAccepted || status == http.StatusGone) {
		_ = g.guard.st.DeleteOrphan(ctx, o.ID)
		log.LogAttrs(ctx, slog.LevelInfo, "orphan mitigated", slog.String("id", o.ID), slog.String("broker", o.Broker),
			slog.String("kind", o.Kind), slog.String("instance_id", o.InstanceID), slog.Int("status", status))
		return
	}
	if err == nil {
		err = fmt.Errorf("the broker answered %d", status)
	}
	schedule, _ := config.ParseSchedule(u.cfg.OrphanSchedule)
	o.Attempts++
	o.LastError = err.Error()
	if o.Attempts > len(schedule) {
		o.NextAttempt = neverDue
		log.LogAttrs(ctx, slog.LevelError, "orphan mitigation gave up; the operator must clean up", slog.String("id", o.ID),
			slog.String("broker", o.Broker), slog.String("kind", o.Kind), slog.String("instance_id", o.InstanceID),
			slog.Int("attempts", o.Attempts), slog.String("error", o.LastError))
	} else {
		o.NextAttempt = g.guard.now().Add(schedule[o.Attempts-1])
	}
	if err := g.guard.st.PutOrphan(ctx, o); err != nil && !errors.Is(err, context.Canceled) {
		log.LogAttrs(ctx, slog.LevelWarn, "orphan not rescheduled", slog.String("id", o.ID), slog.String("error", err.Error()))
	}
}

// undo sends the deprovision or unbind of o to the broker and returns its
// status.
func (u *upstream) undo(ctx context.Context, o store.Orphan) (int, error) {
	p := u.target.JoinPath("v2", "service_instances", o.InstanceID)
	if o.Kind == store.KindUnbind {
		p = p.JoinPath("service_bindings", o.BindingID)
	}
	q := url.Values{"service_id": {o.ServiceID}, "plan_id": {o.PlanID}, "accepts_incomplete": {"true"}}
	if o.Kind == store.KindUnbind && u.max.Less(osbVersion2_14) {
		q.Del("accepts_incomplete") // async unbind needs 2.14
	}
	p.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, p.String(), nil)
	if err != nil {
		return 0, err
	}
	if u.auth != nil {
		req.Header["Authorization"] = u.auth
	}
	req.Header[headerAPIVersion] = u.maxHeader
	req.Header[headerRequestIdentity] = []string{newRequestID()}
	res, err := u.transport.RoundTrip(req)
	if err != nil {
		return 0, errors.New("the broker " + u.describe(err))
	}
	res.Body.Close()
	return res.StatusCode, nil
}
