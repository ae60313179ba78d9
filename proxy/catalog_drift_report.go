package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// The catalog drift API the admin routes, the console and check use (see
// catalog_drift.go for how drift is found).

// CatalogDrift returns every configured broker's drift report, in
// configuration order, from the state store: each broker's accepted and
// latest catalog and what hurts between them as of the latest fetch (a
// broker whose catalog was never fetched has a report with no hashes).
// It reads every broker's record, catalogs included: for operators (GET
// /admin/catalogs/drift, the console), not for a request path. Errors are
// the store's (store.ErrUnavailable).
func (g *Gateway) CatalogDrift(ctx context.Context) ([]catalog.DriftReport, error) {
	recs, err := g.guard.St.ListCatalogs(ctx)
	if err != nil {
		return nil, err
	}
	byBroker := make(map[string]store.BrokerCatalogs, len(recs))
	for _, r := range recs {
		byBroker[r.Broker] = r
	}
	out := make([]catalog.DriftReport, 0, len(g.cfg.Brokers))
	for i := range g.cfg.Brokers {
		b := &g.cfg.Brokers[i]
		out = append(out, driftReport(byBroker[b.Name], b.Name, g.cfg.DriftMode(b)))
	}
	return out, nil
}

// driftReport is the report of a broker's record.
func driftReport(r store.BrokerCatalogs, broker, mode string) catalog.DriftReport {
	d := catalog.DriftReport{Broker: broker, AcceptedHash: r.Accepted.Hash, AcceptedAt: r.Accepted.At, AcceptedBy: r.AcceptedBy,
		LatestHash: r.Latest.Hash, LatestAt: r.Latest.At, Held: r.Held, OnDrift: mode, CheckedAt: r.Checked,
		Items: make([]catalog.DriftItem, 0, len(r.Changes)), Notes: r.Notes}
	for _, c := range r.Changes {
		d.Items = append(d.Items, catalog.DriftItem{Kind: c.Kind, Service: c.Service, Plan: c.Plan, OldID: c.OldID, NewID: c.NewID,
			LiveInstances: c.LiveInstances, Detail: c.Detail})
	}
	return d
}

// AcceptCatalog makes the broker's latest fetched catalog its accepted
// one, on behalf of who (the operator, as the admin log names them): its
// drift is cleared, and a held catalog is released. The gateway then
// fetches the broker's catalogs again, so that this replica serves the
// accepted one at once; other replicas follow at their next fetch (within
// brokers[].catalog.ttl). Errors are *osb.Error: 404 for a broker not in
// the configuration, 409 when there is nothing to accept (no catalog
// fetched, or the latest is the accepted one), 503 when the store fails,
// 409 too when another accept or fetch changed the record meanwhile.
func (g *Gateway) AcceptCatalog(ctx context.Context, broker, who string) (err error) {
	start := g.guard.Now()
	accepted := ""
	defer func() { g.auditAccept(ctx, broker, who, start, accepted, err) }()
	u := g.upstreams[broker]
	if u == nil {
		return osb.Errorf(http.StatusNotFound, "", "no broker named %q in the configuration", broker)
	}
	rec, err := g.guard.St.GetCatalogs(ctx, broker)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return osb.Errorf(http.StatusConflict, "", "no catalog of broker %q was fetched yet: there is nothing to accept", broker)
	case err != nil:
		return &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
			Description: fmt.Sprintf("the state store did not answer for the catalogs of broker %q", broker)}
	case rec.Latest.Hash == "" || rec.Latest.Hash == rec.Accepted.Hash:
		return osb.Errorf(http.StatusConflict, "", "the latest catalog of broker %q is the accepted one (%s): there is nothing to accept", broker, rec.Accepted.Hash)
	}
	prev := rec.Accepted.Hash
	now := g.guard.Now()
	rec.Accepted = store.KeptCatalog{Hash: rec.Latest.Hash, At: now, Body: rec.Latest.Body}
	rec.AcceptedBy, rec.Latest.Body = who, nil
	rec.Changes, rec.Held, rec.Notes, rec.Checked = nil, false, nil, now
	err = g.guard.St.PutCatalogs(ctx, rec, prev)
	switch {
	case errors.Is(err, store.ErrChanged):
		return &osb.Error{Status: http.StatusConflict, Err: err,
			Description: fmt.Sprintf("the catalogs of broker %q changed while accepting (another accept, or a fetch on another replica): read GET /admin/catalogs/drift and accept again", broker)}
	case err != nil:
		return &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
			Description: fmt.Sprintf("the state store did not take the accepted catalog of broker %q", broker)}
	}
	accepted = rec.Accepted.Hash
	g.guard.Metrics.SetDrift(broker, nil)
	if _, err := g.catalogs.Refresh(ctx, u, u.WarmVersion().String()); err != nil {
		g.guard.Log.LogAttrs(ctx, slog.LevelWarn, "catalog accepted; refetching it failed, the cache serves it from the next fetch",
			slog.String("broker", broker), slog.String("error", err.Error()))
	}
	return nil
}

// CatalogDriftAgainst compares each broker's catalog as g's cache holds it
// (fetched by LintCatalogs or WarmCatalogs, at the version those fetch)
// with the accepted catalog in st, weighing the changes against st's
// inventory as a fetch does, and returns a report per configured broker
// (no items where a broker's catalog was not fetched, or st holds no
// accepted catalog for it: a note says so). It writes nothing: osb-gateway
// check reads a gateway's store with it. Errors are st's.
func (g *Gateway) CatalogDriftAgainst(ctx context.Context, st store.Store) ([]catalog.DriftReport, error) {
	t := &catalog.DriftTracker{Cfg: g.cfg, St: st, Inv: g.guard.Inv, Now: g.guard.Now, Log: g.guard.Log, Accepted: map[string]catalog.AcceptedIndex{}}
	out := make([]catalog.DriftReport, 0, len(g.cfg.Brokers))
	for i := range g.cfg.Brokers {
		b := &g.cfg.Brokers[i]
		u := g.upstreams[b.Name]
		rec, err := st.GetCatalogs(ctx, b.Name)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		d := catalog.DriftReport{Broker: b.Name, AcceptedHash: rec.Accepted.Hash, AcceptedAt: rec.Accepted.At, AcceptedBy: rec.AcceptedBy,
			OnDrift: g.cfg.DriftMode(b), Items: []catalog.DriftItem{}}
		e, ok := g.catalogs.Entries.Peek(catalog.Key{Broker: b.Name, Version: u.WarmVersion().String()})
		switch {
		case !ok:
			d.Notes = append(d.Notes, "the broker's catalog was not fetched: nothing to compare")
		case rec.Accepted.Hash == "":
			d.Notes = append(d.Notes, "the state store holds no accepted catalog of the broker yet (the gateway accepts the first one it fetches)")
		default:
			d.LatestHash, d.LatestAt, d.CheckedAt = catalog.Hash(e.Body), e.Fetched, t.Now()
			if d.LatestHash == rec.Accepted.Hash {
				break
			}
			acc, err := t.AcceptedIndex(b.Name, rec.Accepted)
			if err != nil {
				return nil, err
			}
			items, notes, err := t.Assess(ctx, u, rules.CatalogChanges(acc, e.Rules))
			if err != nil {
				return nil, err
			}
			d.Items, d.Notes = append(d.Items, items...), notes
		}
		out = append(out, d)
	}
	return out, nil
}

// auditAccept writes the audit record of an operator's accept of a
// broker's catalog (when the gateway audits): origin "gateway", action
// "accept", who, and the hash accepted or the refusal.
func (g *Gateway) auditAccept(ctx context.Context, broker, who string, start time.Time, hash string, err error) {
	o := g.own.Audit
	if o == nil {
		return
	}
	rec := &audit.Record{Time: start.UTC(), RequestID: core.NewRequestID(), Broker: broker, Endpoint: rules.Catalog.String(),
		Method: http.MethodPost, Status: http.StatusOK, DurationMS: float64(g.guard.Now().Sub(start).Microseconds()) / 1000,
		Outcome: "accepted " + hash, Origin: core.OriginGateway, Action: "accept", Operator: who}
	if err != nil {
		e := osb.AsError(err)
		rec.Status, rec.Outcome, rec.Error = e.Status, "refused", &audit.Error{Code: e.Code, Description: e.Description}
	}
	if werr := o.Writer.Write(rec); werr != nil {
		g.guard.Metrics.AuditWriteError()
		g.own.Log.LogAttrs(ctx, slog.LevelError, "audit record of a catalog accept not written",
			slog.String("broker", broker), slog.String("error", werr.Error()))
	}
}
