package store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// What every backend shares: validation and normalisation of what callers
// give, the expiry rule, the JSON records bolt and Redis store, and orders.

var lockKinds = map[string]bool{
	KindProvision: true, KindUpdate: true, KindDeprovision: true, KindBind: true, KindUnbind: true,
}

// PrepareLock validates l and returns it as a store keeps it: times in UTC
// to the microsecond, a zero Started set to now.
func PrepareLock(l Lock, now time.Time) (Lock, error) {
	switch {
	case l.Key == "":
		return Lock{}, fmt.Errorf("%w: lock has no Key", ErrInvalid)
	case l.Owner == "":
		return Lock{}, fmt.Errorf("%w: lock %q has no Owner", ErrInvalid, l.Key)
	case !lockKinds[l.Kind]:
		return Lock{}, fmt.Errorf("%w: lock %q has Kind %q, want provision, update, deprovision, bind or unbind",
			ErrInvalid, l.Key, l.Kind)
	case len(l.Operation) > MaxOperationLen:
		return Lock{}, fmt.Errorf("%w: lock %q has an Operation of %d characters, more than %d",
			ErrInvalid, l.Key, len(l.Operation), MaxOperationLen)
	}
	if err := checkShim(l.Key, l.Shim); err != nil {
		return Lock{}, err
	}
	if l.Started.IsZero() {
		l.Started = now
	}
	l.Started, l.Deadline, l.Shim.CallEnds, l.Shim.Challenged = utc(l.Started), utc(l.Deadline), utc(l.Shim.CallEnds), utc(l.Shim.Challenged)
	if !storable(l.Started) || !storable(l.Deadline) || !storable(l.Shim.CallEnds) || !storable(l.Shim.Challenged) {
		return Lock{}, fmt.Errorf("%w: lock %q has a time outside years 0 to 9999", ErrInvalid, l.Key)
	}
	if Expired(l.Deadline, now) {
		return Lock{}, fmt.Errorf("%w: lock %q has Deadline %s, not after now (%s)",
			ErrInvalid, l.Key, l.Deadline.Format(time.RFC3339Nano), utc(now).Format(time.RFC3339Nano))
	}
	return l, nil
}

// checkShim validates the emulated operation of the lock key.
func checkShim(key string, sh Shim) error {
	switch {
	case sh.State == "" && sh != (Shim{}):
		return fmt.Errorf("%w: lock %q has an emulated operation without a State", ErrInvalid, key)
	case sh.State != "" && !opStates[sh.State]:
		return fmt.Errorf("%w: lock %q has an emulated operation in State %q, want in progress, succeeded or failed",
			ErrInvalid, key, sh.State)
	case len(sh.BrokerOperation) > MaxOperationLen:
		return fmt.Errorf("%w: lock %q has a BrokerOperation of %d characters, more than %d",
			ErrInvalid, key, len(sh.BrokerOperation), MaxOperationLen)
	}
	return nil
}

// PrepareOrphan validates o and returns it as a store keeps it: times in UTC
// to the microsecond, zero Created and NextAttempt set to now.
func PrepareOrphan(o Orphan, now time.Time) (Orphan, error) {
	switch {
	case o.ID == "":
		return Orphan{}, fmt.Errorf("%w: orphan has no ID", ErrInvalid)
	case o.Kind != KindDeprovision && o.Kind != KindUnbind:
		return Orphan{}, fmt.Errorf("%w: orphan %q has Kind %q, want deprovision or unbind", ErrInvalid, o.ID, o.Kind)
	case (o.ClaimedBy == "") != o.ClaimedUntil.IsZero():
		return Orphan{}, fmt.Errorf("%w: orphan %q has ClaimedBy %q and ClaimedUntil %s, want both set or neither",
			ErrInvalid, o.ID, o.ClaimedBy, o.ClaimedUntil.Format(time.RFC3339Nano))
	}
	if o.Created.IsZero() {
		o.Created = now
	}
	if o.NextAttempt.IsZero() {
		o.NextAttempt = now
	}
	o.Created, o.NextAttempt, o.ClaimedUntil, o.HoldUntil = utc(o.Created), utc(o.NextAttempt), utc(o.ClaimedUntil), utc(o.HoldUntil)
	if !storable(o.Created) || !storable(o.NextAttempt) || !storable(o.ClaimedUntil) || !storable(o.HoldUntil) {
		return Orphan{}, fmt.Errorf("%w: orphan %q has a time outside years 0 to 9999", ErrInvalid, o.ID)
	}
	return o, nil
}

// PrepareClaim validates the arguments of ClaimOrphan and returns until as
// a store keeps it.
func PrepareClaim(id, claimant string, until, now time.Time) (time.Time, error) {
	until = utc(until)
	switch {
	case id == "":
		return time.Time{}, fmt.Errorf("%w: claim of an orphan with no ID", ErrInvalid)
	case claimant == "":
		return time.Time{}, fmt.Errorf("%w: claim of orphan %q names no claimant", ErrInvalid, id)
	case !storable(until):
		return time.Time{}, fmt.Errorf("%w: claim of orphan %q until a time outside years 0 to 9999", ErrInvalid, id)
	case Expired(until, now):
		return time.Time{}, fmt.Errorf("%w: claim of orphan %q until %s, not after now (%s)",
			ErrInvalid, id, until.Format(time.RFC3339Nano), utc(now).Format(time.RFC3339Nano))
	}
	return until, nil
}

// ClaimLive reports whether o has a claim live at now. Redis scripts apply
// the same rule to claimed_until_us.
func ClaimLive(o Orphan, now time.Time) bool {
	return o.ClaimedBy != "" && !Expired(o.ClaimedUntil, now)
}

// Claim is ClaimOrphan's decision on the stored o: o claimed by claimant
// until until, or o and the error saying who holds it.
func Claim(o Orphan, claimant string, until, now time.Time) (Orphan, error) {
	if ClaimLive(o, now) && o.ClaimedBy != claimant {
		return o, OrphanHeld(o)
	}
	o.ClaimedBy, o.ClaimedUntil = claimant, until
	return o, nil
}

// OrphanHeld reports that o's claim stopped a ClaimOrphan.
func OrphanHeld(o Orphan) error {
	return fmt.Errorf("%w: orphan %s claimed by %s until %s", ErrHeld, o.ID, o.ClaimedBy,
		o.ClaimedUntil.Format(time.RFC3339Nano))
}

// NoOrphan is ErrNotFound for the orphan id.
func NoOrphan(id string) error { return fmt.Errorf("%w: orphan %s", ErrNotFound, id) }

// utc is t as stored: UTC, to the microsecond, without a monotonic reading.
func utc(t time.Time) time.Time {
	return t.Truncate(time.Microsecond).UTC()
}

// storable reports whether t fits the JSON records (RFC 3339 years).
func storable(t time.Time) bool {
	return t.Year() >= 0 && t.Year() <= 9999
}

// Expired is the expiry rule of every backend: a deadline not after now.
// Redis scripts apply the same rule to the microsecond values.
func Expired(deadline, now time.Time) bool {
	return deadline.UnixMicro() <= now.UnixMicro()
}

// HeldError reports that holder has the lock an Acquire wanted.
func HeldError(holder Lock) error {
	return fmt.Errorf("%w: %s by a %s operation until %s", ErrHeld, holder.Key, holder.Kind,
		holder.Deadline.Format(time.RFC3339))
}

// Check returns ErrInvalid for a filter List cannot answer.
func (f ListFilter) Check() error {
	if f.InstanceID != "" && f.Broker == "" {
		return fmt.Errorf("%w: list filter has InstanceID %q but no Broker", ErrInvalid, f.InstanceID)
	}
	return nil
}

// Matches reports whether f selects l.
func (f ListFilter) Matches(l Lock) bool {
	return (f.Broker == "" || f.Broker == l.Broker) && (f.Tenant == "" || f.Tenant == l.Tenant) &&
		(f.InstanceID == "" || f.InstanceID == l.InstanceID && f.MatchesKey(l.Key))
}

// MatchesKey reports whether key is f's instance lock or one of its
// binding locks; f.InstanceID must be set.
func (f ListFilter) MatchesKey(key string) bool {
	k := LockKey(f.Broker, f.InstanceID)
	return key == k || strings.HasPrefix(key, k+"/")
}

// ByKey orders locks by Key, for slices.SortFunc.
func ByKey(a, b Lock) int { return cmp.Compare(a.Key, b.Key) }

// ByDeadline orders locks by Deadline, then Key, for slices.SortFunc.
func ByDeadline(a, b Lock) int {
	return cmp.Or(a.Deadline.Compare(b.Deadline), cmp.Compare(a.Key, b.Key))
}

// ByID orders orphans by ID, for slices.SortFunc.
func ByID(a, b Orphan) int { return cmp.Compare(a.ID, b.ID) }

func byNextAttempt(a, b Orphan) int {
	return cmp.Or(a.NextAttempt.Compare(b.NextAttempt), cmp.Compare(a.ID, b.ID))
}

// DueOrphans returns the unclaimed orphans of all that are due at now, in
// order, at most limit of them (limit <= 0: all). It sorts all in place.
func DueOrphans(all []Orphan, now time.Time, limit int) []Orphan {
	slices.SortFunc(all, byNextAttempt)
	due := all[:0]
	for _, o := range all {
		if o.NextAttempt.UnixMicro() > now.UnixMicro() || (limit > 0 && len(due) == limit) {
			break
		}
		if !ClaimLive(o, now) {
			due = append(due, o)
		}
	}
	return due
}

// lockRecord is a Lock as bolt and Redis store it, in JSON. DeadlineUS lets
// Redis scripts apply the expiry rule and Owner is read by them too.
type lockRecord struct {
	Key         string      `json:"key"`
	Owner       string      `json:"owner"`
	Kind        string      `json:"kind"`
	Tenant      string      `json:"tenant,omitempty"`
	Broker      string      `json:"broker,omitempty"`
	InstanceID  string      `json:"instance_id,omitempty"`
	BindingID   string      `json:"binding_id,omitempty"`
	ServiceID   string      `json:"service_id,omitempty"`
	PlanID      string      `json:"plan_id,omitempty"`
	Async       bool        `json:"async,omitempty"`
	Operation   string      `json:"operation,omitempty"`
	TraceParent string      `json:"traceparent,omitempty"`
	Started     time.Time   `json:"started"`
	Deadline    time.Time   `json:"deadline"`
	DeadlineUS  int64       `json:"deadline_us"`
	Shim        *shimRecord `json:"shim,omitempty"`
}

// shimRecord is a Lock's Shim as bolt and Redis store it; records written
// before it existed have none.
type shimRecord struct {
	State           string    `json:"state"`
	Description     string    `json:"description,omitempty"`
	Replica         string    `json:"replica,omitempty"`
	CallEnds        time.Time `json:"call_ends,omitzero"`
	BrokerAsync     bool      `json:"broker_async,omitempty"`
	BrokerOperation string    `json:"broker_operation,omitempty"`
	Hold            bool      `json:"hold,omitempty"`
	Challenged      time.Time `json:"challenged,omitzero"`
}

// EncodeLock returns the JSON record of l (lockRecord) as bolt and Redis
// store it.
func EncodeLock(l Lock) []byte {
	b, err := json.Marshal(lockRecord{
		Key: l.Key, Owner: l.Owner, Kind: l.Kind, Tenant: l.Tenant, Broker: l.Broker,
		InstanceID: l.InstanceID, BindingID: l.BindingID, ServiceID: l.ServiceID, PlanID: l.PlanID,
		Async: l.Async, Operation: l.Operation, TraceParent: l.TraceParent,
		Started: l.Started, Deadline: l.Deadline, DeadlineUS: l.Deadline.UnixMicro(), Shim: encodeShim(l.Shim),
	})
	if err != nil { // strings, bools and storable times always encode
		panic(fmt.Sprintf("store: encode lock: %v", err))
	}
	return b
}

// DecodeLock reads a record EncodeLock wrote.
func DecodeLock(b []byte) (Lock, error) {
	var r lockRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return Lock{}, fmt.Errorf("store: decode lock record: %w", err)
	}
	return Lock{
		Key: r.Key, Owner: r.Owner, Kind: r.Kind, Tenant: r.Tenant, Broker: r.Broker,
		InstanceID: r.InstanceID, BindingID: r.BindingID, ServiceID: r.ServiceID, PlanID: r.PlanID,
		Async: r.Async, Operation: r.Operation, TraceParent: r.TraceParent,
		Started: r.Started.UTC(), Deadline: r.Deadline.UTC(), Shim: decodeShim(r.Shim),
	}, nil
}

func encodeShim(sh Shim) *shimRecord {
	if sh == (Shim{}) {
		return nil
	}
	return &shimRecord{State: sh.State, Description: sh.Description, Replica: sh.Replica, CallEnds: sh.CallEnds,
		BrokerAsync: sh.BrokerAsync, BrokerOperation: sh.BrokerOperation, Hold: sh.Hold, Challenged: sh.Challenged}
}

func decodeShim(r *shimRecord) Shim {
	if r == nil {
		return Shim{}
	}
	sh := Shim{State: r.State, Description: r.Description, Replica: r.Replica,
		BrokerAsync: r.BrokerAsync, BrokerOperation: r.BrokerOperation, Hold: r.Hold}
	if !r.CallEnds.IsZero() {
		sh.CallEnds = r.CallEnds.UTC()
	}
	if !r.Challenged.IsZero() {
		sh.Challenged = r.Challenged.UTC()
	}
	return sh
}

// orphanRecord is an Orphan as bolt and Redis store it, in JSON. Records
// written before the claim fields existed lack them: no claim.
// ClaimedUntilUS lets Redis scripts apply the claim rule; it is a JSON
// string so that a script decoding and re-encoding the record with cjson
// (which keeps 14 significant digits of a number) keeps it exact.
type orphanRecord struct {
	ID             string    `json:"id"`
	Broker         string    `json:"broker,omitempty"`
	Tenant         string    `json:"tenant,omitempty"`
	Kind           string    `json:"kind"`
	InstanceID     string    `json:"instance_id,omitempty"`
	BindingID      string    `json:"binding_id,omitempty"`
	ServiceID      string    `json:"service_id,omitempty"`
	PlanID         string    `json:"plan_id,omitempty"`
	Reason         string    `json:"reason,omitempty"`
	Attempts       int       `json:"attempts,omitempty"`
	NextAttempt    time.Time `json:"next_attempt"`
	Created        time.Time `json:"created"`
	LastError      string    `json:"last_error,omitempty"`
	LockOwner      string    `json:"lock_owner,omitempty"`
	HoldUntil      time.Time `json:"hold_until,omitzero"`
	Undoing        bool      `json:"undoing,omitempty"`
	UndoOperation  string    `json:"undo_operation,omitempty"`
	ClaimedBy      string    `json:"claimed_by,omitempty"`
	ClaimedUntil   time.Time `json:"claimed_until,omitzero"`
	ClaimedUntilUS int64     `json:"claimed_until_us,omitempty,string"`
}

// EncodeOrphan returns the JSON record of o (orphanRecord) as bolt and
// Redis store it.
func EncodeOrphan(o Orphan) []byte {
	r := orphanRecord{
		ID: o.ID, Broker: o.Broker, Tenant: o.Tenant, Kind: o.Kind, InstanceID: o.InstanceID,
		BindingID: o.BindingID, ServiceID: o.ServiceID, PlanID: o.PlanID, Reason: o.Reason,
		Attempts: o.Attempts, NextAttempt: o.NextAttempt, Created: o.Created, LastError: o.LastError,
		LockOwner: o.LockOwner, HoldUntil: o.HoldUntil, Undoing: o.Undoing, UndoOperation: o.UndoOperation,
		ClaimedBy: o.ClaimedBy, ClaimedUntil: o.ClaimedUntil,
	}
	if !o.ClaimedUntil.IsZero() {
		r.ClaimedUntilUS = o.ClaimedUntil.UnixMicro()
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("store: encode orphan: %v", err))
	}
	return b
}

// DecodeOrphan reads a record EncodeOrphan wrote, or one written before
// the claim fields existed (no claim).
func DecodeOrphan(b []byte) (Orphan, error) {
	var r orphanRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return Orphan{}, fmt.Errorf("store: decode orphan record: %w", err)
	}
	o := Orphan{
		ID: r.ID, Broker: r.Broker, Tenant: r.Tenant, Kind: r.Kind, InstanceID: r.InstanceID,
		BindingID: r.BindingID, ServiceID: r.ServiceID, PlanID: r.PlanID, Reason: r.Reason,
		Attempts: r.Attempts, NextAttempt: r.NextAttempt.UTC(), Created: r.Created.UTC(), LastError: r.LastError,
		LockOwner: r.LockOwner, Undoing: r.Undoing, UndoOperation: r.UndoOperation, ClaimedBy: r.ClaimedBy,
	}
	if !r.ClaimedUntil.IsZero() {
		o.ClaimedUntil = r.ClaimedUntil.UTC()
	}
	if !r.HoldUntil.IsZero() {
		o.HoldUntil = r.HoldUntil.UTC()
	}
	return o, nil
}
