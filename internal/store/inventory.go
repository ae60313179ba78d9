package store

import (
	"context"
	"encoding/json"
	"iter"
	"time"
)

// The inventory: what the gateway saw succeed, per broker. It lets the
// gateway answer for a legacy broker what the broker cannot (GET instance
// and binding, last_operation of an operation the gateway carried out,
// a safe repeat of a request), and lets operators list and export what a
// broker holds.

// Operation states, as OSB's last_operation answers them.
const (
	StateInProgress = "in progress"
	StateSucceeded  = "succeeded"
	StateFailed     = "failed"
	// StateUnknown is the state of an operation whose lock an operator
	// released before its outcome came (a LastOperation only, never a
	// Shim): the broker may or may not have done it. A reconcile of the
	// instance or binding polls the broker and settles it.
	StateUnknown = "unknown"
)

// Limits of the inventory; a record beyond them is ErrInvalid.
const (
	// MaxNameLen is the longest Broker or Tenant name, in bytes (the
	// configuration allows 63).
	MaxNameLen = 127
	// MaxIDLen is the longest instance or binding id, in bytes.
	MaxIDLen = 1024
	// MaxRecordLen is the largest record, encoded, in bytes: a context,
	// metadata or sealed secret beyond it is refused rather than stored.
	MaxRecordLen = 1 << 20
)

// Page sizes of ListInstances.
const (
	// DefaultListLimit is the page size for a limit <= 0.
	DefaultListLimit = 100
	// MaxListLimit is the largest page; a larger limit is lowered to it.
	MaxListLimit = 1000
)

// LastOperation is the last operation the gateway saw on an instance or a
// binding, and its outcome. The zero value means none is recorded.
type LastOperation struct {
	// Kind is KindProvision, KindUpdate or KindDeprovision for an instance,
	// KindBind or KindUnbind for a binding; empty when none is recorded.
	Kind string `json:"kind,omitempty"`
	// State is StateInProgress, StateSucceeded, StateFailed or
	// StateUnknown; required with Kind.
	State string `json:"state,omitempty"`
	// Description is the broker's (or the gateway's) description of the
	// outcome, for the platform; may be empty.
	Description string `json:"description,omitempty"`
	// Operation is the operation string the platform polls with (the
	// broker's, or one the gateway owns), at most MaxOperationLen bytes;
	// empty if there was none.
	Operation string `json:"operation,omitempty"`
	// Status is the HTTP status of the broker's final answer to the
	// operation (the call, or the last_operation poll that ended it); 0
	// when there was none, as when the broker call timed out.
	Status int `json:"status,omitempty"`
	// Started is when the operation began; Ended when its outcome came
	// (zero while in progress).
	Started time.Time `json:"started,omitzero"`
	Ended   time.Time `json:"ended,omitzero"`
}

// Instance is a service instance as the gateway saw it succeed. Broker and
// InstanceID name it; every other field may be empty. Raw JSON fields hold
// what the platform or broker sent, byte for byte; the store checks only
// that they are valid JSON.
type Instance struct {
	// Broker is the configured broker name; InstanceID the instance id.
	Broker     string `json:"broker"`
	InstanceID string `json:"instance_id"`
	// Tenant is the tenant whose platform provisioned it.
	Tenant string `json:"tenant,omitempty"`
	// ServiceID and PlanID are the offering and the current plan.
	ServiceID string `json:"service_id,omitempty"`
	PlanID    string `json:"plan_id,omitempty"`
	// Context is the provision's (or latest update's) context object.
	Context json.RawMessage `json:"context,omitempty"`
	// OrganizationGUID and SpaceGUID are the provision's top-level
	// organization_guid and space_guid.
	OrganizationGUID string `json:"organization_guid,omitempty"`
	SpaceGUID        string `json:"space_guid,omitempty"`
	// DashboardURL is the broker's dashboard_url.
	DashboardURL string `json:"dashboard_url,omitempty"`
	// MaintenanceInfo is the instance's maintenance_info object (OSB 2.15).
	MaintenanceInfo json.RawMessage `json:"maintenance_info,omitempty"`
	// Metadata is the broker's metadata object (labels, attributes; OSB
	// 2.16).
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// SealedParameters are the instance's parameters sealed by
	// internal/seal, or empty when secrets are not kept. The store keeps
	// the bytes and never interprets them (JSON: base64).
	SealedParameters []byte `json:"sealed_parameters,omitempty"`
	// LastOperation is the last operation on the instance.
	LastOperation LastOperation `json:"last_operation,omitzero"`
	// Created is when the gateway first recorded the instance, Updated
	// when it last changed. A zero Updated is the store's now on
	// PutInstance; a zero Created the Created of the record it replaces,
	// or the store's now for a new one.
	Created time.Time `json:"created,omitzero"`
	Updated time.Time `json:"updated,omitzero"`
}

// Binding is a service binding as the gateway saw it succeed. Broker,
// InstanceID and BindingID name it; every other field may be empty.
type Binding struct {
	// Broker is the configured broker name; InstanceID and BindingID name
	// the binding.
	Broker     string `json:"broker"`
	InstanceID string `json:"instance_id"`
	BindingID  string `json:"binding_id"`
	// Tenant is the tenant whose platform created it.
	Tenant string `json:"tenant,omitempty"`
	// ServiceID and PlanID are the bind's service_id and plan_id.
	ServiceID string `json:"service_id,omitempty"`
	PlanID    string `json:"plan_id,omitempty"`
	// AppGUID is the bind's app_guid (or bind_resource.app_guid).
	AppGUID string `json:"app_guid,omitempty"`
	// BindResource is the bind's bind_resource object.
	BindResource json.RawMessage `json:"bind_resource,omitempty"`
	// SyslogDrainURL, RouteServiceURL, VolumeMounts and Endpoints are the
	// broker's answer fields of those names, kept for GET binding.
	SyslogDrainURL  string          `json:"syslog_drain_url,omitempty"`
	RouteServiceURL string          `json:"route_service_url,omitempty"`
	VolumeMounts    json.RawMessage `json:"volume_mounts,omitempty"`
	Endpoints       json.RawMessage `json:"endpoints,omitempty"`
	// SealedParameters and SealedCredentials are the bind's parameters and
	// the broker's credentials sealed by internal/seal, or empty when
	// secrets are not kept. The store never interprets them (JSON:
	// base64).
	SealedParameters  []byte `json:"sealed_parameters,omitempty"`
	SealedCredentials []byte `json:"sealed_credentials,omitempty"`
	// ExpiresAt and RenewBefore are the broker's metadata.expires_at and
	// metadata.renew_before (OSB 2.17); zero when the broker sent none.
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
	RenewBefore time.Time `json:"renew_before,omitzero"`
	// LastOperation is the last operation on the binding.
	LastOperation LastOperation `json:"last_operation,omitzero"`
	// Created is when the gateway first recorded the binding, Updated when
	// it last changed; zero as on PutInstance (PutBinding).
	Created time.Time `json:"created,omitzero"`
	Updated time.Time `json:"updated,omitzero"`
}

// InstanceFilter selects instances; an empty field matches all.
type InstanceFilter struct {
	// Broker keeps the instances of this broker.
	Broker string
	// Tenant keeps the instances of this tenant.
	Tenant string
}

// Entry is one record of an export or an import: exactly one of Instance
// and Binding is set. Its JSON form, one per line, is the inventory's
// export format: {"instance":{...}} or {"binding":{...}}, with the field
// names of the JSON tags, times in RFC 3339, raw JSON fields as they are,
// sealed secrets in base64.
type Entry struct {
	Instance *Instance `json:"instance,omitempty"`
	Binding  *Binding  `json:"binding,omitempty"`
}

// ImportResult counts what Import did.
type ImportResult struct {
	// Written records were stored; Skipped were already there and kept
	// (Import without replace).
	Written, Skipped int
}

// Inventory is the part of a Store that keeps the inventory. Its contract
// is the Store's (concurrency, contexts, errors; see Store), and:
//
// Each Put and Delete is atomic, indexes and counts included: on every
// backend a record and its listing entries change together (one bbolt
// transaction, one Lua script on one Redis slot, one mutex). A Put
// replaces the whole record: concurrent Puts of one record leave one of
// them, whole. (The gateway writes an instance's record under its
// operation lock, so writers of one record do not race in practice.)
//
// Not-found is ErrNotFound, wrapped with what was missing. Records that do
// not validate are ErrInvalid and change nothing: an empty Broker,
// InstanceID or BindingID; a NUL byte in any of them or in Tenant; a Broker
// or Tenant longer than MaxNameLen or an id longer than MaxIDLen; a raw
// JSON field that is not valid JSON; an unknown LastOperation Kind or
// State (or a Kind without a State); an Operation longer than
// MaxOperationLen; a time outside the years 0 to 9999; a record encoding
// to more than MaxRecordLen bytes. A stored record that does not decode
// is ErrUnavailable.
//
// Times come back in UTC, to the microsecond; raw JSON and sealed fields
// come back as stored (nil when empty), in slices the caller owns.
//
// Bindings and their instance: PutBinding does not require the instance
// to be recorded (the gateway may see a bind on an instance provisioned
// before it kept an inventory). DeleteInstance deletes the instance and
// every binding recorded under it in the same atomic step, and returns
// those bindings: a deprovision the broker accepted took them with it
// (platforms unbind first; a purge does not), so the inventory follows
// what the broker did rather than keep bindings of a deleted instance, and
// the caller sees what went (to log or audit it) instead of losing it
// silently.
//
// Listing is by key, (Broker, InstanceID) byte order, a page at a time:
// a cursor names the last record of a page, and the next page starts
// after it. Records added or removed while a listing runs may or may not
// appear; a record present throughout appears exactly once. Listings and
// exports are not snapshots.
type Inventory interface {
	// PutInstance stores in, replacing the instance with the same Broker
	// and InstanceID, and returns it as stored: a zero Updated set to now,
	// a zero Created to the Created of the record it replaces (a
	// provision repeated over a recorded one keeps when the gateway first
	// recorded the instance), or to now when there is none. The store
	// reads that Created with the write, replacing the record only if it
	// is still the one it read, so a writer need not read the record
	// first (and nothing written in between is lost): a new instance costs
	// no read; over a record PostgreSQL and Redis take a second round
	// trip, which a read by the caller would have cost too.
	PutInstance(ctx context.Context, in Instance) (Instance, error)

	// GetInstance returns the instance, or ErrNotFound.
	GetInstance(ctx context.Context, broker, instanceID string) (Instance, error)

	// DeleteInstance deletes the instance and every binding recorded under
	// it (see above), and returns the bindings deleted, sorted by
	// BindingID. Afterwards nothing of the instance is left. It returns
	// ErrNotFound if there was neither an instance record nor a binding.
	DeleteInstance(ctx context.Context, broker, instanceID string) ([]Binding, error)

	// ListInstances returns up to limit instances matching f that sort
	// after cursor ("" starts at the first), by Broker then InstanceID,
	// and the cursor of the next page, "" when there is none. A limit <= 0
	// is DefaultListLimit; above MaxListLimit, MaxListLimit. A page may
	// hold fewer than limit instances while more follow (records deleted
	// meanwhile); only an empty next cursor ends the listing. Cursors are
	// opaque URL-safe strings; one that does not decode is ErrInvalid.
	//
	// Cost per page: memory walks the broker's sorted ids from the cursor
	// (with f.Tenant, skipping other tenants' ids: proportional to the ids
	// passed; the first listing after writes merges the new ids in, O(n));
	// bolt seeks to the cursor in its index of ids and reads the page's
	// values (with f.Tenant, passing other tenants' values as memory
	// passes their ids); Redis runs one script per broker (a sorted-set range
	// and the page's records); PostgreSQL reads a range of its primary key
	// (with f.Tenant, passing other tenants' rows, as bolt). Without
	// f.Broker, the same per broker, in name order (Redis reads the set of
	// brokers first).
	ListInstances(ctx context.Context, f InstanceFilter, cursor string, limit int) ([]Instance, string, error)

	// CountInstances returns how many instances match f. It reads
	// counters, not records: its cost grows with the number of brokers
	// (and tenants), not of instances.
	CountInstances(ctx context.Context, f InstanceFilter) (int, error)

	// PutBinding stores b, replacing the binding with the same Broker,
	// InstanceID and BindingID, and returns it as stored, its zero Created
	// and Updated set as PutInstance sets an instance's.
	PutBinding(ctx context.Context, b Binding) (Binding, error)

	// GetBinding returns the binding, or ErrNotFound.
	GetBinding(ctx context.Context, broker, instanceID, bindingID string) (Binding, error)

	// DeleteBinding deletes the binding, or returns ErrNotFound.
	DeleteBinding(ctx context.Context, broker, instanceID, bindingID string) error

	// ListBindings returns the bindings recorded under the instance (which
	// itself need not be recorded), sorted by BindingID.
	ListBindings(ctx context.Context, broker, instanceID string) ([]Binding, error)

	// CountBindings returns how many bindings the broker has ("" : all
	// brokers), from counters like CountInstances.
	CountBindings(ctx context.Context, broker string) (int, error)

	// ExpiringBindings returns up to limit bindings of broker ("": of
	// every broker) whose ExpiresAt is set and before before (those
	// already past it included), soonest first, ties by Broker,
	// InstanceID and BindingID. A limit <= 0 is DefaultListLimit; above
	// MaxListLimit, MaxListLimit. Bolt and Redis read an index of the
	// bindings that have an ExpiresAt, kept with the records: the cost
	// grows with the bindings it passes, never with the bindings without
	// one (bolt passes the expiring bindings of other brokers too; Redis
	// runs one range per broker; PostgreSQL reads a partial index by
	// ExpiresAt, passing other brokers' bindings as bolt). Memory compares
	// the ExpiresAt of every binding (kept beside its record, no decoding).
	ExpiringBindings(ctx context.Context, broker string, before time.Time, limit int) ([]Binding, error)

	// CountExpiring returns, per broker, how many bindings have an
	// ExpiresAt before before; brokers with none are left out. It reads
	// no record: bolt walks the index entries before before, Redis counts
	// a range per broker (O(log n) each), PostgreSQL groups the rows its
	// ExpiresAt index finds, memory compares every binding's ExpiresAt.
	CountExpiring(ctx context.Context, before time.Time) (map[string]int, error)

	// Export yields every record: all instances in listing order, then all
	// bindings by Broker, InstanceID and BindingID. It reads a page at a
	// time (no long transaction, no snapshot; see above), so it suits an
	// inventory of any size. On an error it yields the error once, with
	// a zero Entry, and stops.
	Export(ctx context.Context) iter.Seq2[Entry, error]

	// Import stores entries, each as PutInstance or PutBinding would, but
	// keeps a record already stored unless replace is set (so an import
	// adopting a broker's instances does not overwrite what the gateway
	// recorded itself), and takes each entry as it is: a zero Created is
	// now, whatever the record it replaces. It validates every entry first and writes nothing
	// if one is invalid (ErrInvalid, naming its index). Each record is
	// written atomically; the batch as a whole is not (bolt writes it in
	// one transaction, Redis pipelines it): after another error some
	// entries may be written, and importing the batch again is harmless.
	Import(ctx context.Context, entries []Entry, replace bool) (ImportResult, error)
}
