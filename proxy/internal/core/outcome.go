package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Outcomes of a call, as Scope.Outcome names them on spans, metrics and
// audit records.
const (
	OutcomeForwarded = "forwarded"         // the broker's answer went to the platform
	OutcomeBlocked   = "blocked"           // the guard refused: another operation is in progress
	OutcomeRejected  = "rejected"          // the gateway refused the request, or the broker's answer, by a rule or a protection
	OutcomeFromCache = "served_from_cache" // answered from the catalog cache
	OutcomeFailed    = "failed"            // the broker was unreachable or timed out, the platform left, or the gateway failed
)

// Outcome says what the gateway did with the call; read it after the inner
// stages returned. A broker's own error answers count as forwarded.
func (s *Scope) Outcome() string {
	switch {
	case s.Blocked:
		return OutcomeBlocked
	case s.FromCache:
		return OutcomeFromCache
	case s.Protection == ProtectionPolicy:
		return OutcomeDenied
	case s.Protection != "":
		return OutcomeRejected // a protection refused it, 503s of reads included
	case s.Emulated == EmulatedRetired:
		return OutcomeRetired
	case s.Err == nil:
		return OutcomeForwarded
	}
	var refused *ResponseRefused
	var e *osb.Error
	if errors.As(s.Err, &refused) || errors.As(s.Err, &e) && e.Status < 500 {
		return OutcomeRejected
	}
	return OutcomeFailed
}

// StatusSent returns the StatusSent sent to the platform, 200 when nothing set it
// (the scope stage's own fallback runs after the trace, metrics and audit
// stages have read it).
func (s *Scope) StatusSent() int {
	if s.Status == 0 {
		return http.StatusOK
	}
	return s.Status
}

// WentAway reports whether err is r's context's end, the platform gone
// (both servers end it for a reset or a failed write, never for a
// half-close), and records it: the call gets nothing (the scope stage
// aborts the answer), and 499 is logged, never a 5xx of the gateway's.
func (s *Scope) WentAway(r *http.Request, err error) bool {
	if !errors.Is(err, context.Canceled) || r.Context().Err() == nil {
		return false
	}
	s.Err, s.Status = fmt.Errorf("platform went away: %w", err), StatusClientClosed
	return true
}

// Fail records err as the gateway's answer and writes it as an OSB error;
// a broker's refusal of the call's version (a CachedAnswer) is written as
// the broker sent it, as an answer from the catalog cache.
func (s *Scope) Fail(w http.ResponseWriter, err error) {
	var cached CachedAnswer
	if errors.As(err, &cached) {
		s.FromCache = true
		cached.WriteAnswer(w)
		return
	}
	s.Err = err
	osb.WriteError(w, err)
}

// CachedAnswer is an error the gateway answers with as the broker's own
// answer, the way it has it cached (a broker's refusal of a version).
type CachedAnswer interface {
	error
	WriteAnswer(w http.ResponseWriter)
}

// FailUnread answers err, like Scope.fail, to a request whose body the
// gateway will not read: the route and auth stages' refusals, which run
// before the body stage, and a declared body over the limit. The answer
// goes out at once, whatever the client is still sending, and the
// connection is closed after it instead of being drained for the next
// request: net/http would otherwise read up to 256 KiB of the unread body
// (waiting for it as long as listen.read_timeout allows) before it even
// writes the status line. Over HTTP/2 only the stream ends, which the
// server does by itself.
func (s *Scope) FailUnread(w http.ResponseWriter, r *http.Request, err error) {
	if !HasBody(r) {
		s.Fail(w, err)
		return
	}
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	s.Fail(w, err)
	// The response is flushed before the server closes the request body;
	// with the read deadline passed, closing it reads nothing more.
	_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
}

// HasBody reports whether r comes with a body (declared or chunked).
func HasBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
}

// Username is the tenant credential's Username the auth stage found:
// the credential that authenticated the call or, for refused
// credentials, one of the tenant's whose Username was presented; "" when
// there is none.
func (s *Scope) Username() string {
	if s.Cred == nil {
		return ""
	}
	return s.Cred.Name
}

// LabelEndpoint is the endpoint the call is counted and traced under: the
// classified call's, or, for a call refused before the classify stage ran
// (a wrong password, a missing version header), the endpoint its method and
// path have the shape of (rules.EndpointOf), so that a 401 or 412 is not
// counted as "unknown". It does not allocate.
func (s *Scope) LabelEndpoint(method string) rules.Endpoint {
	if s.Call.Endpoint != rules.Unknown || s.Path == "" {
		return s.Call.Endpoint
	}
	return rules.EndpointOf(method, s.Path)
}

// ServiceAndPlan returns the call's service and plan ids: from the
// request body when it has them, else from the query.
func (s *Scope) ServiceAndPlan() (service, plan string) {
	service, plan = s.Call.ServiceID, s.Call.PlanID
	if s.Request != nil {
		if s.Request.ServiceID != "" {
			service = s.Request.ServiceID
		}
		if s.Request.PlanID != "" {
			plan = s.Request.PlanID
		}
	}
	return service, plan
}

// AddFindings records vs in the scope and, when report is set, logs each
// (see loggable for what a log line may say).
func (s *Scope) AddFindings(log *slog.Logger, r *http.Request, dir string, vs []rules.Violation, report bool) {
	for _, v := range vs {
		s.Findings = append(s.Findings, Finding{Direction: dir, Violation: v})
		if report {
			log.LogAttrs(r.Context(), slog.LevelWarn, "OSB rule broken", slog.String("request_id", s.RequestID),
				slog.String("tenant", s.Tenant), slog.String("broker", s.Broker), slog.String("endpoint", s.Call.Endpoint.String()),
				slog.String("direction", dir), slog.String("rule", v.Rule), slog.String("finding", loggable(v)))
		}
	}
}

// loggable is what logs may say of a finding: its description, except for
// the rules on parameters, whose descriptions quote the platform's values
// (which may be secrets): they are named by rule only.
func loggable(v rules.Violation) string {
	if strings.HasPrefix(v.Rule, "request.parameters") {
		return "parameters break the plan's schema (values withheld from logs; the rule id says which check)"
	}
	return v.Description
}

// LogError is the access log's "error": the gateway's own description,
// or, for a refusal by the request rules, the rule ids (descriptions may
// quote parameter values).
func (s *Scope) LogError() string {
	if !s.RefusedByRules {
		return s.Err.Error()
	}
	ids := make([]string, 0, len(s.Findings))
	for _, f := range s.Findings {
		ids = append(ids, f.Rule)
	}
	return "refused by the OSB request rules: " + strings.Join(ids, ", ")
}

// EmulatedRetired is Scope.Emulated for an answer the gateway gave in the
// place of a retired broker; OutcomeRetired is its outcome.
const (
	EmulatedRetired = "retired"
	OutcomeRetired  = "retired"
)
