package guard

import (
	"context"
	"log/slog"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/accesslog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// OwnLog is where a Gateway writes what it does on its own (reconcile.go):
// the audit writer and the access log of its platform calls.
type OwnLog struct {
	Audit  *core.AuditOptions // nil: no audit records
	Access *accesslog.Writer  // nil: access lines go to log
	Log    *slog.Logger
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
func (g *Guard) ownRecord(ctx context.Context, act ownAction) {
	now := g.Now()
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
	if o := g.Own.Audit; o != nil {
		rec := &audit.Record{Time: act.start.UTC(), RequestID: id, TraceID: core.TraceIDOf(l.TraceParent), Tenant: l.Tenant,
			Broker: l.Broker, Endpoint: ep.String(), Method: act.method, InstanceID: l.InstanceID, BindingID: l.BindingID,
			ServiceID: l.ServiceID, PlanID: l.PlanID, Status: status, DurationMS: float64(now.Sub(act.start).Microseconds()) / 1000,
			Outcome: act.res.Outcome, Operation: core.TruncateTo(l.Operation, core.MaxOperationLen),
			Origin: core.OriginGateway, Action: act.action, Operator: act.who}
		if e != nil {
			rec.Error = &audit.Error{Code: e.Code, Description: e.Description}
		}
		if err := o.Writer.Write(rec); err != nil {
			g.Metrics.AuditWriteError()
			g.Own.Log.LogAttrs(ctx, slog.LevelError, "audit record of the gateway's own action not written",
				slog.String("request_id", id), slog.String("action", act.action), slog.String("error", err.Error()))
		}
	}
	fields := []accesslog.Field{{Key: "request_id", Str: id}, {Key: "method", Str: act.method}, {Key: "tenant", Str: l.Tenant},
		{Key: "broker", Str: l.Broker}, {Key: "endpoint", Str: ep.String()}, {Key: "instance_id", Str: l.InstanceID}}
	if l.BindingID != "" {
		fields = append(fields, accesslog.Field{Key: "binding_id", Str: l.BindingID})
	}
	fields = append(fields, accesslog.Field{Key: "status", Num: int64(status), IsN: true},
		accesslog.Field{Key: "duration_us", Num: now.Sub(act.start).Microseconds(), IsN: true},
		accesslog.Field{Key: "origin", Str: core.OriginGateway}, accesslog.Field{Key: "action", Str: act.action},
		accesslog.Field{Key: "operator", Str: act.who}, accesslog.Field{Key: "outcome", Str: act.res.Outcome})
	if e != nil {
		fields = append(fields, accesslog.Field{Key: "error", Str: e.Description})
	}
	level := slog.LevelInfo
	if act.action != "reconcile" || status >= 500 {
		level = slog.LevelWarn // an operator changed what the platform sees, or the broker failed
	}
	if g.Own.Access != nil {
		g.Own.Access.Write(now, level, fields)
		return
	}
	h := g.Own.Log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	rec := slog.NewRecord(now, level, "request", 0)
	for _, f := range fields {
		if f.IsN {
			rec.AddAttrs(slog.Int64(f.Key, f.Num))
		} else {
			rec.AddAttrs(slog.String(f.Key, f.Str))
		}
	}
	_ = h.Handle(ctx, rec)
}
