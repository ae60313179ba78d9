package request

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// checkPredecessor checks a rotation (a bind with predecessor_binding_id,
// OSB 2.17) against what the gateway knows of the broker's bindings: the
// predecessor must be in the broker's inventory under the bind's
// instance. The inventory may lack bindings made before the gateway kept
// one, so an unknown predecessor is refused (in enforce mode) only when
// the broker's inventory holds every binding it has — brokers[].emulate.gone,
// which says so of its instances; otherwise it is a finding, logged, and
// the call goes on. It reports whether it refused the call.
//
// Nothing is checked for other calls, for a broker without an inventory,
// or when the store cannot tell: the guard, which needs the same store
// next, answers for that.
func checkPredecessor(w http.ResponseWriter, r *http.Request, s *core.Scope, st store.Inventory, log *slog.Logger) bool {
	up := upstream.Of(s.Route)
	if s.Call.Endpoint != rules.Bind || s.Request == nil || s.Request.PredecessorBindingID == "" || up.Cfg.Inventory.Disabled {
		return false
	}
	if !predecessorUnknown(r.Context(), st, up.Name, s.Call.InstanceID, s.Request.PredecessorBindingID) {
		return false
	}
	vs := []rules.Violation{rules.UnknownPredecessor(s.Call, s.Request.PredecessorBindingID)}
	refuse := up.Cfg.Validation.Requests == config.ModeEnforce && up.Cfg.Emulate.Gone
	s.AddFindings(log, r, "request", vs, !refuse)
	if refuse {
		s.RefusedByRules = true
		s.Fail(w, rules.Reject(vs))
	}
	return refuse
}

// predecessorUnknown reports whether the broker's inventory answers that
// it holds no binding predecessorID under the instance.
func predecessorUnknown(ctx context.Context, st store.Inventory, broker, instanceID, predecessorID string) bool {
	_, err := st.GetBinding(ctx, broker, instanceID, predecessorID)
	return errors.Is(err, store.ErrNotFound)
}
