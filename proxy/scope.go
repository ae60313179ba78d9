package proxy

import (
	"context"
	"net/http"
	"net/http/httputil"

	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

// Scope is the per-request record (core.Scope): the scope stage creates
// it, inner stages fill it, the stages outside them read it.
type Scope = core.Scope

// ScopeOf returns the Scope of a request in the gateway chain (core.ScopeOf);
// nil outside the chain.
func ScopeOf(w http.ResponseWriter, r *http.Request) *Scope { return core.ScopeOf(w, r) }

// ScopeFrom returns the Scope in ctx: the context of a request past the
// upstream stage (see ScopeOf), or nil.
func ScopeFrom(ctx context.Context) *Scope { return core.ScopeFrom(ctx) }

// Outcomes of a call, as Scope.Outcome names them on spans, metrics and
// audit records.
const (
	OutcomeForwarded = core.OutcomeForwarded // the broker's answer went to the platform
	OutcomeBlocked   = core.OutcomeBlocked   // the guard refused: another operation is in progress
	OutcomeRejected  = core.OutcomeRejected  // the gateway refused the request, or the broker's answer, by a rule or a protection
	OutcomeFromCache = core.OutcomeFromCache // answered from the catalog cache
	OutcomeFailed    = core.OutcomeFailed    // the broker was unreachable or timed out, the platform left, or the gateway failed
)

// withScope is the scope stage (core.WithScope).
var withScope = core.WithScope

// StatusClientClosed is recorded (never sent) when the platform closed the
// connection before the broker answered.
const StatusClientClosed = core.StatusClientClosed

// NewBufferPool returns the httputil.BufferPool the gateway's upstreams
// share (upstream.NewBufferPool). The load benchmark's bare proxy uses it
// too, so that its gateway/bare-proxy ratio compares the chain and not the
// copy buffers.
func NewBufferPool() httputil.BufferPool { return upstream.NewBufferPool() }

// CatalogCache is the gateway's cache of broker catalogs (catalog.Cache).
type CatalogCache = catalog.Cache

// DriftReport is one broker's catalog drift (catalog.DriftReport), and
// DriftItem one change in it.
type (
	DriftReport = catalog.DriftReport
	DriftItem   = catalog.DriftItem
)
