package proxy

import (
	"context"
	"log/slog"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// ownLog is where a Gateway writes what it does on its own (reconcile.go):
// the audit writer and the access log of its platform calls.
type ownLog struct {
	audit  *AuditOptions // nil: no audit records
	access *AccessLog    // nil: access lines go to log
	log    *slog.Logger
}

// ownAction is one action the gateway took on its own for an operation
// lock: a reconcile's poll, a forced state, a release.
type ownAction struct {
	action    string // "reconcile", "force" or "release"
	who       string
	requestID string // the poll's X-Broker-API-Request-Identity; "" for none
	lock      store.Lock
	start     time.Time
	method    string // the broker call's (GET for a poll), or the admin action's
	res       ReconcileResult
	err       error
}

// ownRecord writes act's audit record (when the gateway audits) and its
// access line, both marked origin "gateway" with who asked. Neither holds
// anything secret: ids, states and descriptions only.
func (g *Gateway) ownRecord(ctx context.Context, act ownAction) {
	now := g.guard.now()
	l := act.lock
	ep := rules.InstanceLastOperation
	if l.BindingID != "" {
		ep = rules.BindingLastOperation
	}
	if act.action == "release" {
		ep = rules.LockedBy(l.Kind)
	}
	id := act.requestID
	if id == "" {
		id = core.NewRequestID()
	}
	status := act.res.Status
	var e *osb.Error
	if act.err != nil {
		e = osb.AsError(act.err)
		status = e.Status
	} else if act.action != "reconcile" {
		status = 200
	}
	if o := g.own.audit; o != nil {
		rec := &audit.Record{Time: act.start.UTC(), RequestID: id, TraceID: traceIDOf(l.TraceParent), Tenant: l.Tenant,
			Broker: l.Broker, Endpoint: ep.String(), Method: act.method, InstanceID: l.InstanceID, BindingID: l.BindingID,
			ServiceID: l.ServiceID, PlanID: l.PlanID, Status: status, DurationMS: float64(now.Sub(act.start).Microseconds()) / 1000,
			Outcome: act.res.Outcome, Operation: truncateTo(l.Operation, maxOperationLen),
			Origin: originGateway, Action: act.action, Operator: act.who}
		if e != nil {
			rec.Error = &audit.Error{Code: e.Code, Description: e.Description}
		}
		if err := o.Writer.Write(rec); err != nil {
			g.guard.metrics.AuditWriteError()
			g.own.log.LogAttrs(ctx, slog.LevelError, "audit record of the gateway's own action not written",
				slog.String("request_id", id), slog.String("action", act.action), slog.String("error", err.Error()))
		}
	}
	fields := []accessField{{key: "request_id", str: id}, {key: "method", str: act.method}, {key: "tenant", str: l.Tenant},
		{key: "broker", str: l.Broker}, {key: "endpoint", str: ep.String()}, {key: "instance_id", str: l.InstanceID}}
	if l.BindingID != "" {
		fields = append(fields, accessField{key: "binding_id", str: l.BindingID})
	}
	fields = append(fields, accessField{key: "status", num: int64(status), isN: true},
		accessField{key: "duration_us", num: now.Sub(act.start).Microseconds(), isN: true},
		accessField{key: "origin", str: originGateway}, accessField{key: "action", str: act.action},
		accessField{key: "operator", str: act.who}, accessField{key: "outcome", str: act.res.Outcome})
	if e != nil {
		fields = append(fields, accessField{key: "error", str: e.Description})
	}
	level := slog.LevelInfo
	if act.action != "reconcile" || status >= 500 {
		level = slog.LevelWarn // an operator changed what the platform sees, or the broker failed
	}
	if g.own.access != nil {
		g.own.access.write(now, level, fields)
		return
	}
	h := g.own.log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	rec := slog.NewRecord(now, level, "request", 0)
	for _, f := range fields {
		if f.isN {
			rec.AddAttrs(slog.Int64(f.key, f.num))
		} else {
			rec.AddAttrs(slog.String(f.key, f.str))
		}
	}
	_ = h.Handle(ctx, rec)
}
