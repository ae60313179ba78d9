package guard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/mutation"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// NeverDue is the NextAttempt of an orphan the gateway will not try on its
// own: reported only, or given up on. POST /admin/orphans/{id}/retry makes
// it due.
var NeverDue = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// OrphanTick is how often the background worker looks for due orphans.
const OrphanTick = 2 * time.Second

// Results of one mitigation (mitigate), for logs and the admin API
// (core's words).
const (
	mitigated       = core.Mitigated
	MitigationFail  = core.MitigationFail
	mitigationBusy  = core.MitigationBusy
	mitigationTaken = core.MitigationTaken
	mitigationGone  = core.MitigationGone
	mitigationDown  = core.MitigationDown
	mitigationAsync = core.MitigationAsync
)

// OrphanID names the pending undo of one instance or binding: a repeated
// failure replaces the entry, and a later success finds it to cancel. It
// is the kind and a digest of the broker and ids, so that it fits in a URL
// path segment (POST /admin/orphans/{id}/retry) whatever the ids hold.
func OrphanID(kind, broker, instanceID, bindingID string) string {
	key := store.LockKey(broker, instanceID)
	if kind == store.KindUnbind {
		key = store.BindingLockKey(broker, instanceID, bindingID)
	}
	sum := sha256.Sum256([]byte(key))
	return kind + "-" + hex.EncodeToString(sum[:16])
}

// orphanIDOf is the orphan a call's failure would leave, and its success
// cancels: the deprovision of the instance for provision and deprovision,
// the unbind of the binding for bind and unbind.
func orphanIDOf(u *upstream.Upstream, c rules.Call) string {
	if c.Endpoint == rules.Bind || c.Endpoint == rules.Unbind {
		return OrphanID(store.KindUnbind, u.Name, c.InstanceID, c.BindingID)
	}
	return OrphanID(store.KindDeprovision, u.Name, c.InstanceID, "")
}

// NoteOrphan records an orphan candidate for a provision or bind that may
// have left something behind, per the broker's orphan_mitigation: report
// stores and logs it, mitigate also makes it due at due. lockOwner is the
// owner of a lock the orphan takes over (the hold after a timeout), or "";
// holdUntil is the end of that hold (store.Orphan.HoldUntil), or zero.
// When the store does not take it, it returns the orphan and false: the
// caller keeps the call's lock and queues both (pending.putOrphan), so no
// platform call can succeed and cancel in between.
func (g *Guard) NoteOrphan(ctx context.Context, s *core.Scope, reason string, due time.Time, lockOwner string, holdUntil time.Time) (store.Orphan, bool) {
	up := upstream.Of(s.Route)
	if s.Lock == nil {
		return store.Orphan{}, true
	}
	l := s.Lock.Lock
	l.Tenant = s.Tenant
	o, decision := g.NewOrphan(up, l, reason, due, lockOwner)
	if decision == "" {
		return store.Orphan{}, true
	}
	o.HoldUntil = holdUntil
	s.Orphan = decision
	return g.PutCandidate(ctx, up, o, decision)
}

// NewOrphan is the orphan candidate a provision or bind holding l leaves,
// per the broker's orphan_mitigation (see noteOrphan), and the decision
// ("reported" or "queued"); "" when there is none (another kind, or
// orphan_mitigation off).
func (g *Guard) NewOrphan(up *upstream.Upstream, l store.Lock, reason string, due time.Time, lockOwner string) (store.Orphan, string) {
	mode := up.Cfg.OrphanMitigation
	if mode == "off" || (l.Kind != store.KindProvision && l.Kind != store.KindBind) {
		return store.Orphan{}, ""
	}
	o := store.Orphan{ID: orphanIDOf(up, rules.Call{Endpoint: rules.LockedBy(l.Kind), InstanceID: l.InstanceID, BindingID: l.BindingID}),
		Broker: up.Name, Tenant: l.Tenant, InstanceID: l.InstanceID,
		BindingID: l.BindingID, ServiceID: l.ServiceID, PlanID: l.PlanID, Reason: reason, Created: g.Now(),
		NextAttempt: NeverDue, Kind: store.KindDeprovision, LockOwner: lockOwner}
	if l.Kind == store.KindBind {
		o.Kind = store.KindUnbind
	}
	if mode == "mitigate" && !due.Equal(NeverDue) {
		o.NextAttempt = due
		return o, "queued"
	}
	return o, "reported"
}

// PutCandidate stores the orphan candidate o (see noteOrphan).
func (g *Guard) PutCandidate(ctx context.Context, up *upstream.Upstream, o store.Orphan, decision string) (store.Orphan, bool) {
	if mutation.NoOrphans {
		return o, true // broken on purpose (bench/campaign -mutation no-orphans)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	if err := g.St.PutOrphan(ctx, o); err != nil {
		g.Metrics.StoreError("orphan")
		g.Log.LogAttrs(ctx, slog.LevelError, "orphan candidate not recorded yet; the instance stays locked until the operation state takes it",
			slog.String("broker", up.Name), slog.String("instance_id", o.InstanceID), slog.String("error", err.Error()))
		return o, false
	}
	g.Log.LogAttrs(ctx, slog.LevelWarn, "orphan candidate", slog.String("id", o.ID), slog.String("broker", up.Name),
		slog.String("tenant", o.Tenant), slog.String("kind", o.Kind), slog.String("instance_id", o.InstanceID),
		slog.String("binding_id", o.BindingID), slog.String("reason", o.Reason), slog.String("decision", decision),
		slog.Time("due", o.NextAttempt))
	return o, true
}

// orphanCancel is the cancellation of the pending orphan id that a
// success the platform sees makes (see Answered). A provision's inventory
// record takes it to the store in the same call (Inventory.called), which
// sets done, and cancelled when there was one; the guard deletes an
// orphan whose cancellation is not done itself (cancelOrphan), one store
// call more.
type orphanCancel struct {
	id              string
	done, cancelled bool
}

// cancelOrphan deletes the pending orphan id after a success the platform
// saw; false means the store failed and nothing is known.
func (g *Guard) cancelOrphan(ctx context.Context, s *core.Scope, id string) bool {
	err := g.St.DeleteOrphan(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return true
	case err != nil:
		return false
	}
	g.cancelled(ctx, s, id)
	return true
}

// cancelled notes that s's success cancelled the pending orphan id.
func (g *Guard) cancelled(ctx context.Context, s *core.Scope, id string) {
	s.Orphan = "cancelled"
	g.Log.LogAttrs(ctx, slog.LevelInfo, "orphan mitigation cancelled: the platform's call succeeded", slog.String("id", id),
		slog.String("broker", s.Broker), slog.String("instance_id", s.Call.InstanceID), slog.String("binding_id", s.Call.BindingID))
}

// OnTimeout is what the gateway does when it gives up on a mutating call
// at the broker's timeout: the broker may still be working, so the lock is
// held for hold_after_timeout; a provision or bind becomes an orphan
// candidate, due (with orphan_mitigation: mitigate) when the hold ends and
// taking the held lock over.
func (g *Guard) OnTimeout(ctx context.Context, s *core.Scope) {
	owner := g.holdAfterTimeout(s)
	if ok, why := rules.OrphanOnTimeout(s.Call); ok {
		hold := g.Now().Add(upstream.Of(s.Route).Cfg.HoldAfterTimeout)
		if o, ok := g.NoteOrphan(ctx, s, why, hold, owner, hold); !ok {
			held := s.Lock.Lock
			held.Owner = owner
			g.Retry.Add(Pending{Lock: held, PutOrphan: &o, Keep: true})
		}
	}
}
