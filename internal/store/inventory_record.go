package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// What every backend shares for the inventory: validation, the record
// encoding, keys and cursors.

var instanceKinds = map[string]bool{KindProvision: true, KindUpdate: true, KindDeprovision: true}
var bindingKinds = map[string]bool{KindBind: true, KindUnbind: true}
var opStates = map[string]bool{StateInProgress: true, StateSucceeded: true, StateFailed: true}

// lastOpStates are the states of a LastOperation: opStates and
// StateUnknown (a released operation).
var lastOpStates = map[string]bool{StateInProgress: true, StateSucceeded: true, StateFailed: true, StateUnknown: true}

// CheckName returns ErrInvalid if a broker or tenant name is unusable;
// required names must not be empty.
func CheckName(what, name string, required bool) error {
	switch {
	case required && name == "":
		return fmt.Errorf("%w: no %s", ErrInvalid, what)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalid, what, len(name), MaxNameLen)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: %s %q contains a NUL byte", ErrInvalid, what, name)
	}
	return nil
}

// checkID returns ErrInvalid if an instance or binding id is unusable.
func checkID(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: no %s", ErrInvalid, what)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalid, what, len(id), MaxIDLen)
	case strings.IndexByte(id, 0) >= 0:
		return fmt.Errorf("%w: %s %q contains a NUL byte", ErrInvalid, what, id)
	}
	return nil
}

// CheckInstanceKey validates the names of an instance.
func CheckInstanceKey(broker, instanceID string) error {
	if err := CheckName("broker", broker, true); err != nil {
		return err
	}
	return checkID("instance id", instanceID)
}

// CheckBindingKey validates the names of a binding.
func CheckBindingKey(broker, instanceID, bindingID string) error {
	if err := CheckInstanceKey(broker, instanceID); err != nil {
		return err
	}
	return checkID("binding id", bindingID)
}

// checkJSON returns ErrInvalid if a non-empty raw field is not JSON.
func checkJSON(what string, raw []byte) error {
	if len(raw) > 0 && !json.Valid(raw) {
		return fmt.Errorf("%w: %s is not valid JSON", ErrInvalid, what)
	}
	return nil
}

// prepareOp validates op against kinds and returns it as stored.
func prepareOp(op LastOperation, kinds map[string]bool) (LastOperation, error) {
	switch {
	case op == LastOperation{}:
		return op, nil
	case !kinds[op.Kind]:
		return op, fmt.Errorf("%w: last operation has Kind %q", ErrInvalid, op.Kind)
	case !lastOpStates[op.State]:
		return op, fmt.Errorf("%w: last operation has State %q, want %q, %q, %q or %q",
			ErrInvalid, op.State, StateInProgress, StateSucceeded, StateFailed, StateUnknown)
	case len(op.Operation) > MaxOperationLen:
		return op, fmt.Errorf("%w: last operation has an Operation of %d bytes, more than %d",
			ErrInvalid, len(op.Operation), MaxOperationLen)
	case op.Status < 0 || op.Status > 999:
		return op, fmt.Errorf("%w: last operation has Status %d", ErrInvalid, op.Status)
	}
	op.Started, op.Ended = utc(op.Started), utc(op.Ended)
	return op, nil
}

// storableTimes returns ErrInvalid unless every time in ts fits a record.
func storableTimes(what string, ts ...time.Time) error {
	for _, t := range ts {
		if !storable(t) {
			return fmt.Errorf("%w: %s has a time outside years 0 to 9999", ErrInvalid, what)
		}
	}
	return nil
}

// PrepareInstance validates in and returns it as stored with its encoded
// record: times in UTC to the microsecond, zero Created and Updated set to
// now, empty raw fields nil.
func PrepareInstance(in Instance, now time.Time) (Instance, []byte, error) {
	if err := CheckInstanceKey(in.Broker, in.InstanceID); err != nil {
		return Instance{}, nil, err
	}
	what := "instance " + in.Broker + "/" + in.InstanceID
	err := CheckName("tenant", in.Tenant, false)
	for _, f := range []struct {
		name string
		raw  []byte
	}{{"context", in.Context}, {"maintenance_info", in.MaintenanceInfo}, {"metadata", in.Metadata}} {
		if err == nil {
			err = checkJSON(f.name, f.raw)
		}
	}
	if err == nil {
		in.LastOperation, err = prepareOp(in.LastOperation, instanceKinds)
	}
	if err != nil {
		return Instance{}, nil, fmt.Errorf("%s: %w", what, err)
	}
	in.Created, in.Updated = stamp(in.Created, now), stamp(in.Updated, now)
	op := in.LastOperation
	if err := storableTimes(what, in.Created, in.Updated, op.Started, op.Ended); err != nil {
		return Instance{}, nil, err
	}
	in.Context, in.MaintenanceInfo, in.Metadata = nilIfEmpty(in.Context), nilIfEmpty(in.MaintenanceInfo), nilIfEmpty(in.Metadata)
	in.SealedParameters = nilIfEmpty(in.SealedParameters)
	rec := encodeInstance(in)
	if len(rec) > MaxRecordLen {
		return Instance{}, nil, fmt.Errorf("%w: %s encodes to %d bytes, more than %d", ErrInvalid, what, len(rec), MaxRecordLen)
	}
	return in, pack(rec), nil
}

// PrepareBinding is PrepareInstance for a binding.
func PrepareBinding(b Binding, now time.Time) (Binding, []byte, error) {
	if err := CheckBindingKey(b.Broker, b.InstanceID, b.BindingID); err != nil {
		return Binding{}, nil, err
	}
	what := "binding " + b.Broker + "/" + b.InstanceID + "/" + b.BindingID
	err := CheckName("tenant", b.Tenant, false)
	for _, f := range []struct {
		name string
		raw  []byte
	}{{"bind_resource", b.BindResource}, {"volume_mounts", b.VolumeMounts}, {"endpoints", b.Endpoints}} {
		if err == nil {
			err = checkJSON(f.name, f.raw)
		}
	}
	if err == nil {
		b.LastOperation, err = prepareOp(b.LastOperation, bindingKinds)
	}
	if err != nil {
		return Binding{}, nil, fmt.Errorf("%s: %w", what, err)
	}
	b.Created, b.Updated = stamp(b.Created, now), stamp(b.Updated, now)
	b.ExpiresAt, b.RenewBefore = utc(b.ExpiresAt), utc(b.RenewBefore)
	op := b.LastOperation
	if err := storableTimes(what, b.Created, b.Updated, b.ExpiresAt, b.RenewBefore, op.Started, op.Ended); err != nil {
		return Binding{}, nil, err
	}
	b.BindResource, b.VolumeMounts, b.Endpoints = nilIfEmpty(b.BindResource), nilIfEmpty(b.VolumeMounts), nilIfEmpty(b.Endpoints)
	b.SealedParameters, b.SealedCredentials = nilIfEmpty(b.SealedParameters), nilIfEmpty(b.SealedCredentials)
	rec := encodeBinding(b)
	if len(rec) > MaxRecordLen {
		return Binding{}, nil, fmt.Errorf("%w: %s encodes to %d bytes, more than %d", ErrInvalid, what, len(rec), MaxRecordLen)
	}
	return b, pack(rec), nil
}

// KeepInstanceCreated is a put of in over old, the instance record stored
// (empty: none), where in and its record rec came from PrepareInstance of
// an Instance whose Created was zero: the put keeps old's Created (see
// Inventory.PutInstance), so in comes back with it and rec encoded again;
// both as they are when old is empty or has the same Created. A backend
// calls it with the record it replaces in hand, in the step that
// replaces it.
func KeepInstanceCreated(in Instance, rec, old []byte) (Instance, []byte, error) {
	c, err := recordCreated(old)
	switch {
	case err != nil:
		return Instance{}, nil, fmt.Errorf("%w: instance %s/%s: decode record: %w", ErrUnavailable, in.Broker, in.InstanceID, err)
	case c.IsZero() || c.Equal(in.Created):
		return in, rec, nil
	}
	in.Created = c
	return in, pack(encodeInstance(in)), nil
}

// KeepBindingCreated is KeepInstanceCreated for a binding.
func KeepBindingCreated(b Binding, rec, old []byte) (Binding, []byte, error) {
	c, err := recordCreated(old)
	switch {
	case err != nil:
		return Binding{}, nil, fmt.Errorf("%w: binding %s/%s/%s: decode record: %w", ErrUnavailable, b.Broker, b.InstanceID, b.BindingID, err)
	case c.IsZero() || c.Equal(b.Created):
		return b, rec, nil
	}
	b.Created = c
	return b, pack(encodeBinding(b)), nil
}

// recordCreated is the Created of a stored instance or binding record,
// zero for an empty one.
func recordCreated(rec []byte) (time.Time, error) {
	var c time.Time
	if len(rec) == 0 {
		return c, nil
	}
	_, err := fields(rec, func(tag byte, p []byte) error {
		var err error
		if tag == tagCreated {
			c, err = decodeTime(p)
		}
		return err
	})
	return c, err
}

// stamp is t as stored, or now if t is zero.
func stamp(t, now time.Time) time.Time {
	if t.IsZero() {
		return utc(now)
	}
	return utc(t)
}

func nilIfEmpty[S ~[]byte](b S) S {
	if len(b) == 0 {
		return nil
	}
	return b
}

// PreparedEntry is a validated import entry.
type PreparedEntry struct {
	// Instance is the entry's instance as stored, or nil for a binding.
	Instance *Instance
	// Binding is the entry's binding as stored, or nil for an instance.
	Binding *Binding
	// Rec is the encoded record.
	Rec []byte
}

// PrepareEntries validates every entry of an import.
func PrepareEntries(entries []Entry, now time.Time) ([]PreparedEntry, error) {
	out := make([]PreparedEntry, len(entries))
	for i, e := range entries {
		var err error
		switch {
		case (e.Instance == nil) == (e.Binding == nil):
			err = fmt.Errorf("%w: want exactly one of Instance and Binding", ErrInvalid)
		case e.Instance != nil:
			var in Instance
			in, out[i].Rec, err = PrepareInstance(*e.Instance, now)
			out[i].Instance = &in
		default:
			var b Binding
			b, out[i].Rec, err = PrepareBinding(*e.Binding, now)
			out[i].Binding = &b
		}
		if err != nil {
			return nil, fmt.Errorf("import entry %d: %w", i, err)
		}
	}
	return out, nil
}

// Keys. Names and ids hold no NUL byte, so NUL separates them and a key's
// parts sort as the tuple they make: InstanceKey(b, i) sorts by (b, i).

// InstanceKey is "<broker>\x00<instance id>".
func InstanceKey(broker, instanceID string) string { return broker + "\x00" + instanceID }

// BindingSubkey is "<instance id>\x00<binding id>": a binding within its
// broker.
func BindingSubkey(instanceID, bindingID string) string { return instanceID + "\x00" + bindingID }

// SplitKey splits a key made of NUL-separated parts.
func SplitKey(k string) []string { return strings.Split(k, "\x00") }

// The cursor of a listing is the InstanceKey of the last record of a page,
// in unpadded base64url, so that it can travel in a URL query.

// EncodeCursor returns the cursor of a page that ends with the instance
// (broker, instanceID).
func EncodeCursor(broker, instanceID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(InstanceKey(broker, instanceID)))
}

// decodeCursor returns the broker and instance id a cursor names; ok is
// false for the empty cursor (start at the first record).
func decodeCursor(cursor string) (broker, instanceID string, ok bool, err error) {
	if cursor == "" {
		return "", "", false, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	parts := SplitKey(string(raw))
	if err != nil || len(parts) != 2 || CheckInstanceKey(parts[0], parts[1]) != nil {
		return "", "", false, fmt.Errorf("%w: list cursor %q is not one this store made", ErrInvalid, cursor)
	}
	return parts[0], parts[1], true, nil
}

// listLimit applies the defaults of ListInstances to limit.
func listLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultListLimit
	case limit > MaxListLimit:
		return MaxListLimit
	}
	return limit
}

// CheckFilter returns ErrInvalid for a filter naming an unusable broker or
// tenant.
func CheckFilter(f InstanceFilter) error {
	if err := CheckName("broker", f.Broker, false); err != nil {
		return err
	}
	return CheckName("tenant", f.Tenant, false)
}

// PageOf trims found (in order, up to limit+1 long) to a page and returns
// the next cursor: found holds limit+1 records when more follow.
func PageOf[T any](found []T, limit int, key func(T) (string, string)) ([]T, string) {
	if len(found) <= limit {
		return found, ""
	}
	found = found[:limit]
	return found, EncodeCursor(key(found[limit-1]))
}

// InstanceName returns what names in, its Broker and InstanceID: the key
// PageOf takes for instances.
func InstanceName(in Instance) (string, string) { return in.Broker, in.InstanceID }

// RecordTenant reads the tenant of an encoded record without decoding the
// rest (see the record layout).
func RecordTenant(rec []byte) (string, bool) {
	if len(rec) < 2 || (rec[0] != recordPlain && rec[0] != recordDeflated) ||
		int(rec[1]) > MaxNameLen || len(rec) < 2+int(rec[1]) {
		return "", false
	}
	return string(rec[2 : 2+int(rec[1])]), true
}

// SameTenant reports whether the record's tenant is tenant, without
// allocating.
func SameTenant(rec []byte, tenant string) bool {
	return len(rec) >= 2+len(tenant) && (rec[0] == recordPlain || rec[0] == recordDeflated) &&
		int(rec[1]) == len(tenant) && string(rec[2:2+len(tenant)]) == tenant
}

// notFound is ErrNotFound for what.
func notFound(what string) error { return fmt.Errorf("%w: %s", ErrNotFound, what) }

// ListArgs validates the arguments of ListInstances and returns the
// cursor's position and the page size.
func ListArgs(f InstanceFilter, cursor string, limit int) (broker, instanceID string, size int, err error) {
	if err := CheckFilter(f); err != nil {
		return "", "", 0, err
	}
	broker, instanceID, _, err = decodeCursor(cursor)
	return broker, instanceID, listLimit(limit), err
}

// NoInstance is ErrNotFound for the instance it names.
func NoInstance(broker, instanceID string) error {
	return notFound("instance " + broker + "/" + instanceID)
}

// NoBinding is ErrNotFound for the binding it names.
func NoBinding(broker, instanceID, bindingID string) error {
	return notFound("binding " + strings.Join([]string{broker, instanceID, bindingID}, "/"))
}

// BadKey reports an inventory key that is not made as the layout says.
func BadKey(k []byte) error {
	return fmt.Errorf("%w: inventory key %q has the wrong number of parts", ErrUnavailable, k)
}
