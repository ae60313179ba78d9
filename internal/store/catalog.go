package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The catalog record: per broker, the catalog the gateway accepted as its
// baseline and the latest one it fetched, with what changed between them
// (catalog drift). Two catalogs per broker, not a history: each fetch
// replaces Latest, each accept replaces Accepted.

// ErrChanged means PutCatalogs found the broker's accepted catalog no
// longer the one the caller read (another replica or an operator accepted
// another meanwhile); nothing was changed. Read the record again and redo.
var ErrChanged = errors.New("store: changed meanwhile")

// MaxCatalogChanges is the most Changes a BrokerCatalogs record keeps;
// PutCatalogs refuses more (ErrInvalid).
const MaxCatalogChanges = 1000

// KeptCatalog is one catalog of a broker as the gateway keeps it. The zero
// value is none.
type KeptCatalog struct {
	// Hash names the catalog's bytes: the hex SHA-256 of Body (the
	// caller's; the store does not check it). Empty: no catalog.
	Hash string `json:"hash,omitempty"`
	// At is when it was fetched (Latest) or accepted (Accepted).
	At time.Time `json:"at,omitzero"`
	// Body is the catalog as the broker sent it, byte for byte; it may be
	// nil in Latest when Latest.Hash is Accepted.Hash (the same bytes).
	Body []byte `json:"body,omitempty"`
}

// CatalogChange is one change between a broker's accepted catalog and its
// latest that hurts the platform (catalog drift). The store keeps its
// fields and interprets none.
type CatalogChange struct {
	// Kind names the change: guid_changed, plan_removed, service_removed,
	// made_unbindable, made_non_updatable, schema_incompatible.
	Kind string `json:"kind"`
	// Service and Plan name what changed (names, as in the catalog).
	Service string `json:"service,omitempty"`
	Plan    string `json:"plan,omitempty"`
	// OldID and NewID are its ids before and after.
	OldID string `json:"old_id,omitempty"`
	NewID string `json:"new_id,omitempty"`
	// LiveInstances counts the inventory's instances the change reaches.
	LiveInstances int `json:"live_instances"`
	// Detail says what changed, for a person.
	Detail string `json:"detail,omitempty"`
}

// BrokerCatalogs is a broker's catalog record. Broker names it.
type BrokerCatalogs struct {
	// Broker is the configured broker name.
	Broker string `json:"broker"`
	// Accepted is the baseline drift is judged against: the first catalog
	// fetched, then each one accepted (by the gateway when it strands
	// nothing, or by an operator).
	Accepted KeptCatalog `json:"accepted,omitzero"`
	// AcceptedBy names who accepted it: "gateway", or the operator.
	AcceptedBy string `json:"accepted_by,omitempty"`
	// Latest is the latest catalog fetched.
	Latest KeptCatalog `json:"latest,omitzero"`
	// Changes is what hurts between Accepted and Latest, as of Checked
	// (the inventory changes after it); empty when nothing does.
	Changes []CatalogChange `json:"changes,omitempty"`
	// Checked is when Changes were worked out.
	Checked time.Time `json:"checked,omitzero"`
	// Held means the gateway serves Accepted in place of Latest
	// (catalog.on_drift: hold) until an operator accepts Latest.
	Held bool `json:"held,omitempty"`
	// Notes are what the check of Changes could not do, for a person (no
	// stored parameters to check a schema against, say).
	Notes []string `json:"notes,omitempty"`
}

// CatalogHistory is the part of a Store that keeps each broker's catalog
// record (see BrokerCatalogs). Its contract is the Store's (concurrency,
// contexts, errors; times in UTC to the microsecond, bodies in slices the
// caller owns), and: each PutCatalogs is atomic, the check of the accepted
// hash included (one bbolt transaction, one Lua script on one Redis key,
// one mutex). A record whose Broker is empty, holds a NUL byte or is
// longer than MaxNameLen, with more than MaxCatalogChanges Changes, a
// time outside the years 0 to 9999, or encoding to more than
// MaxRecordLen*64 bytes is ErrInvalid.
type CatalogHistory interface {
	// GetCatalogs returns the broker's catalog record, or ErrNotFound.
	GetCatalogs(ctx context.Context, broker string) (BrokerCatalogs, error)

	// ListCatalogs returns every broker's catalog record, sorted by
	// Broker. It reads every record, bodies included: for operators and
	// the drift report, not for a request path.
	ListCatalogs(ctx context.Context) ([]BrokerCatalogs, error)

	// PutCatalogs stores bc, whole, if the broker's stored record has
	// Accepted.Hash ifAccepted ("" : there is no record, or it has no
	// accepted catalog); otherwise it returns ErrChanged and changes
	// nothing.
	PutCatalogs(ctx context.Context, bc BrokerCatalogs, ifAccepted string) error

	// DeleteCatalogs removes the broker's record, or returns ErrNotFound.
	DeleteCatalogs(ctx context.Context, broker string) error
}

// maxCatalogRecordLen bounds an encoded BrokerCatalogs: two catalogs in
// base64 and their changes.
const maxCatalogRecordLen = 64 * MaxRecordLen

// PrepareCatalogs checks bc and returns it with its times in UTC to the
// microsecond, and its encoding.
func PrepareCatalogs(bc BrokerCatalogs) (BrokerCatalogs, []byte, error) {
	switch {
	case bc.Broker == "" || len(bc.Broker) > MaxNameLen || strings.IndexByte(bc.Broker, 0) >= 0:
		return bc, nil, fmt.Errorf("%w: catalog record broker %q: want 1 to %d bytes without NUL", ErrInvalid, bc.Broker, MaxNameLen)
	case len(bc.Changes) > MaxCatalogChanges:
		return bc, nil, fmt.Errorf("%w: catalog record of broker %q: %d changes, at most %d", ErrInvalid, bc.Broker, len(bc.Changes), MaxCatalogChanges)
	}
	for _, t := range []*time.Time{&bc.Accepted.At, &bc.Latest.At, &bc.Checked} {
		if !t.IsZero() && (t.Year() < 0 || t.Year() > 9999) {
			return bc, nil, fmt.Errorf("%w: catalog record of broker %q: time %s outside the years 0 to 9999", ErrInvalid, bc.Broker, t)
		}
		*t = storedTime(*t)
	}
	b, err := json.Marshal(bc)
	if err != nil {
		return bc, nil, fmt.Errorf("%w: catalog record of broker %q: %w", ErrInvalid, bc.Broker, err)
	}
	if len(b) > maxCatalogRecordLen {
		return bc, nil, fmt.Errorf("%w: catalog record of broker %q: %d bytes encoded, at most %d", ErrInvalid, bc.Broker, len(b), maxCatalogRecordLen)
	}
	return bc, b, nil
}

// storedTime is t as stored: UTC, to the microsecond; zero stays zero.
func storedTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// DecodeCatalogs decodes a stored record.
func DecodeCatalogs(b []byte) (BrokerCatalogs, error) {
	var bc BrokerCatalogs
	if err := json.Unmarshal(b, &bc); err != nil {
		return BrokerCatalogs{}, fmt.Errorf("%w: catalog record does not decode: %w", ErrUnavailable, err)
	}
	return bc, nil
}

// NoCatalogs is ErrNotFound for a broker's catalog record.
func NoCatalogs(broker string) error {
	return fmt.Errorf("%w: catalog record of broker %s", ErrNotFound, broker)
}

// ChangedCatalogs is ErrChanged for a broker whose accepted hash is not
// the one expected.
func ChangedCatalogs(broker, want, got string) error {
	return fmt.Errorf("%w: the accepted catalog of broker %s is %q, not %q", ErrChanged, broker, got, want)
}
