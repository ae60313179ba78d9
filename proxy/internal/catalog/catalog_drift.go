package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Catalog drift. The state store keeps, per broker, the catalog the
// gateway accepted and the latest it fetched (store.BrokerCatalogs). Each
// fetch of a broker's catalog (not per platform, for brokers with
// vary_by_platform) is compared with the accepted one (rules.
// CatalogChanges), and the changes are weighed against the inventory: a
// plan or service removed, or a plan made unbindable or not updatable,
// counts only while live instances are on it; an id changed under a name
// always counts; a changed create or update schema counts for the live
// instances whose stored parameters passed the old schema and fail the
// new one (only where parameters are stored: brokers[].inventory.secrets
// encrypted). A catalog with nothing that counts becomes the accepted one
// by itself ("the last catalog that strands nothing"); one with drift is
// recorded as the latest, logged (one warn line per new item), counted in
// osb_gateway_catalog_drift{broker,kind}, and served (catalog.on_drift:
// serve) or held back (hold: the accepted catalog is served in its place)
// until an operator accepts it (AcceptCatalog).
//
// The comparison runs inside the fetch, which the cache makes once per
// catalog.ttl per broker and version (most of them in the background):
// a store read and write, and, only when the catalog differs from the
// accepted one in a way that may hurt, one listing of the broker's
// instances. A platform call served from the cache pays nothing.

// driftTimeout bounds the drift work of one fetch (store calls, the
// inventory listing).
const driftTimeout = 30 * time.Second

// acceptedByGateway is BrokerCatalogs.AcceptedBy for a catalog the
// gateway accepted itself: the first one, or one that strands nothing.
const acceptedByGateway = "gateway"

// DriftReport is one broker's catalog drift: its accepted catalog, the
// latest fetched, and what hurts between them.
type DriftReport struct {
	// Broker is the configured broker name.
	Broker string `json:"broker"`
	// AcceptedHash and AcceptedAt name the accepted catalog (the hex
	// SHA-256 of its bytes) and when it was accepted; AcceptedBy who
	// accepted it ("gateway", or the operator). Empty and zero while no
	// catalog of the broker was fetched.
	AcceptedHash string    `json:"accepted_hash,omitempty"`
	AcceptedAt   time.Time `json:"accepted_at,omitzero"`
	AcceptedBy   string    `json:"accepted_by,omitempty"`
	// LatestHash and LatestAt name the latest catalog fetched.
	LatestHash string    `json:"latest_hash,omitempty"`
	LatestAt   time.Time `json:"latest_at,omitzero"`
	// Held means the gateway serves the accepted catalog in place of the
	// latest (catalog.on_drift: hold) until an operator accepts it.
	Held bool `json:"held"`
	// OnDrift is the broker's catalog.on_drift: "serve" or "hold".
	OnDrift string `json:"on_drift"`
	// Items is what hurts, as of CheckedAt; empty: no drift.
	Items     []DriftItem `json:"items"`
	CheckedAt time.Time   `json:"checked_at,omitzero"`
	// Notes say what the check could not do (schemas not checked for want
	// of stored parameters, say).
	Notes []string `json:"notes,omitempty"`
}

// DriftItem is one change between a broker's accepted and latest catalog
// that hurts the platform.
type DriftItem struct {
	// Kind is guid_changed, service_removed, plan_removed,
	// made_unbindable, made_non_updatable or schema_incompatible (see the
	// rules.Drift constants).
	Kind string `json:"kind"`
	// Service and Plan are the names of what changed (Plan empty for a
	// service).
	Service string `json:"service"`
	Plan    string `json:"plan,omitempty"`
	// OldID is its id in the accepted catalog, NewID in the latest (""
	// when gone).
	OldID string `json:"old_id"`
	NewID string `json:"new_id,omitempty"`
	// LiveInstances counts the inventory's instances on OldID (for
	// schema_incompatible: those whose stored parameters fail the new
	// schema).
	LiveInstances int `json:"live_instances"`
	// Detail says what changed, for a person.
	Detail string `json:"detail"`
}

// DriftTracker weighs each fetched catalog against the accepted one; the
// catalog cache holds the one of the Gateway built last.
type DriftTracker struct {
	Cfg     *config.Config
	St      store.Store
	Inv     Inventory
	Now     func() time.Time
	Log     *slog.Logger
	metrics *metrics.Metrics

	mu       sync.Mutex
	Accepted map[string]AcceptedIndex // by broker: the accepted catalog, decoded
}

// AcceptedIndex is a broker's accepted catalog, decoded once per hash.
type AcceptedIndex struct {
	hash string
	ix   *rules.Index
}

// Inventory is what drift weighs a catalog's changes against: the
// guard's inventory of the instances brokers hold.
type Inventory interface {
	// Keeps reports whether u's instances are recorded.
	Keeps(u *upstream.Upstream) bool
	// SealsFor reports whether u's parameters are kept (sealed).
	SealsFor(u *upstream.Upstream) bool
	// Open is a sealed secret of an instance or binding in the clear, or
	// nil.
	Open(ctx context.Context, sealed []byte, what, broker, instanceID, bindingID string) json.RawMessage
}

// TrackDrift makes c weigh each fetch against the accepted catalogs in
// st, and the changes against inv, for the brokers of cfg.
func (c *Cache) TrackDrift(cfg *config.Config, st store.Store, inv Inventory, now func() time.Time, log *slog.Logger, m *metrics.Metrics) {
	t := &DriftTracker{Cfg: cfg, St: st, Inv: inv, Now: now, Log: log, metrics: m,
		Accepted: map[string]AcceptedIndex{}}
	if prev := c.drift.Load(); prev != nil && prev.St == t.St {
		prev.mu.Lock()
		for k, v := range prev.Accepted {
			t.Accepted[k] = v
		}
		prev.mu.Unlock()
	}
	m.StartDrift(cfg)
	c.drift.Store(t)
}

// Hash is the hex SHA-256 of a catalog's bytes.
func Hash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// observeDrift weighs the fetched entry e against the broker's accepted
// catalog and returns the entry to cache and serve: e, or, while the
// broker's catalog is held, an entry of the accepted catalog. A store
// that fails leaves e served (logged): drift is a report, and the hold
// cannot be judged without the store.
func (c *Cache) observeDrift(ctx context.Context, f Fetch, e *Entry) *Entry {
	t := c.drift.Load()
	if t == nil || f.Key.Platform != "" {
		return e
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), driftTimeout)
	defer cancel()
	held, err := t.observe(ctx, f.Up, e)
	if errors.Is(err, store.ErrChanged) { // accepted elsewhere meanwhile: once more
		held, err = t.observe(ctx, f.Up, e)
	}
	if err != nil {
		t.Log.LogAttrs(ctx, slog.LevelWarn, "catalog drift not checked; the fetched catalog is served",
			slog.String("broker", f.Up.Name), slog.String("error", err.Error()))
		return e
	}
	if held != nil {
		return held
	}
	return e
}

// observe records e as the broker's latest catalog and returns the entry
// to serve in its place while the broker's catalog is held (nil: serve e).
func (t *DriftTracker) observe(ctx context.Context, u *upstream.Upstream, e *Entry) (*Entry, error) {
	rec, err := t.St.GetCatalogs(ctx, u.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	now, hash := t.Now(), Hash(e.Body)
	prevAccepted, prev := rec.Accepted.Hash, rec
	if rec.Accepted.Hash == "" || rec.Accepted.Hash == hash {
		// The first catalog, or the accepted one again.
		if rec.Accepted.Hash == "" {
			rec = store.BrokerCatalogs{Broker: u.Name, Accepted: store.KeptCatalog{Hash: hash, At: now, Body: e.Body}, AcceptedBy: acceptedByGateway}
		}
		rec.Latest, rec.Changes, rec.Held, rec.Notes, rec.Checked = store.KeptCatalog{Hash: hash, At: now}, nil, false, nil, now
		if err := t.St.PutCatalogs(ctx, rec, prevAccepted); err != nil {
			return nil, err
		}
		t.metrics.SetDrift(u.Name, nil)
		return nil, nil
	}
	acc, err := t.AcceptedIndex(u.Name, rec.Accepted)
	if err != nil {
		return nil, err
	}
	items, notes, err := t.Assess(ctx, u, rules.CatalogChanges(acc, e.Rules))
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		// Nothing stranded: the new catalog is the accepted one.
		rec = store.BrokerCatalogs{Broker: u.Name, Accepted: store.KeptCatalog{Hash: hash, At: now, Body: e.Body}, AcceptedBy: acceptedByGateway,
			Latest: store.KeptCatalog{Hash: hash, At: now}, Checked: now, Notes: notes}
		if err := t.St.PutCatalogs(ctx, rec, prevAccepted); err != nil {
			return nil, err
		}
		t.metrics.SetDrift(u.Name, nil)
		t.Log.LogAttrs(ctx, slog.LevelInfo, "catalog changed; accepted, it strands nothing", slog.String("broker", u.Name),
			slog.String("accepted_hash", hash), slog.String("previous_hash", prevAccepted))
		return nil, nil
	}
	hold := t.Cfg.DriftMode(&u.Cfg) == config.OnDriftHold
	rec.Latest = store.KeptCatalog{Hash: hash, At: now, Body: e.Body}
	rec.Changes, rec.Checked, rec.Held, rec.Notes = toStoreChanges(items), now, hold, notes
	if err := t.St.PutCatalogs(ctx, rec, prevAccepted); err != nil {
		return nil, err
	}
	t.metrics.SetDrift(u.Name, driftKinds(items))
	t.logNew(ctx, u.Name, prev, hash, items, hold)
	if !hold {
		return nil, nil
	}
	return heldEntry(e, rec.Accepted, acc), nil
}

// AcceptedIndex returns the decoded accepted catalog k of broker.
func (t *DriftTracker) AcceptedIndex(broker string, k store.KeptCatalog) (*rules.Index, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.Accepted[broker]; ok && a.hash == k.Hash {
		return a.ix, nil
	}
	ix, _, err := rules.NewIndex(k.Body)
	if err != nil {
		return nil, fmt.Errorf("the accepted catalog of broker %q (%s) does not decode: %w", broker, k.Hash, err)
	}
	t.Accepted[broker] = AcceptedIndex{hash: k.Hash, ix: ix}
	return ix, nil
}

// logNew logs one warn line per drift item that the record before did not
// hold for the same latest catalog.
func (t *DriftTracker) logNew(ctx context.Context, broker string, prev store.BrokerCatalogs, hash string, items []DriftItem, held bool) {
	seen := map[store.CatalogChange]bool{}
	if prev.Latest.Hash == hash {
		for _, c := range prev.Changes {
			seen[c] = true
		}
	}
	for _, it := range items {
		if seen[toStoreChange(it)] {
			continue
		}
		t.Log.LogAttrs(ctx, slog.LevelWarn, "catalog drift", slog.String("broker", broker), slog.String("kind", it.Kind),
			slog.String("service", it.Service), slog.String("plan", it.Plan), slog.String("old_id", it.OldID),
			slog.String("new_id", it.NewID), slog.Int("live_instances", it.LiveInstances), slog.String("detail", it.Detail),
			slog.Bool("held", held), slog.String("latest_hash", hash))
	}
}

// heldEntry is e with the accepted catalog's bytes and index in place of
// the fetched ones: what a held broker's platforms get.
func heldEntry(e *Entry, acc store.KeptCatalog, ix *rules.Index) *Entry {
	return keptCatalogEntry(e.key, acc, ix, e.ContentType, e.Fetched, e.Expires)
}

// keptCatalogEntry is an entry of a catalog the store keeps: its bytes,
// ETag, and Last-Modified (when it was fetched or accepted).
func keptCatalogEntry(key Key, k store.KeptCatalog, ix *rules.Index, contentType []string, fetched, expires time.Time) *Entry {
	sum := sha256.Sum256(k.Body)
	e := &Entry{key: key, Body: k.Body, Rules: ix, ContentType: contentType, Fetched: fetched, Expires: expires,
		Etag: []string{`"` + hex.EncodeToString(sum[:16]) + `"`}, LastModified: k.At.UTC().Truncate(time.Second)}
	e.LastModHdr = []string{e.LastModified.Format(http.TimeFormat)}
	e.plain = NewTenantView(e.Body, e.Etag)
	return e
}

func toStoreChange(it DriftItem) store.CatalogChange {
	return store.CatalogChange{Kind: it.Kind, Service: it.Service, Plan: it.Plan, OldID: it.OldID, NewID: it.NewID,
		LiveInstances: it.LiveInstances, Detail: it.Detail}
}

func toStoreChanges(items []DriftItem) []store.CatalogChange {
	out := make([]store.CatalogChange, len(items))
	for i, it := range items {
		out[i] = toStoreChange(it)
	}
	return out
}

// driftKinds lists the kind of each item, for the drift metric.
func driftKinds(items []DriftItem) []string {
	kinds := make([]string, len(items))
	for i, it := range items {
		kinds[i] = it.Kind
	}
	return kinds
}
