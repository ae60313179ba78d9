package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"time"
)

// Usage records: what the usage report needs of the instances and
// bindings the inventory no longer holds. A record is a closed interval of
// one instance on one plan, or the life of one binding:
//
//   - DeleteInstance writes one for the instance (its plan at deletion,
//     from its Created to now) and one per binding it deleted with it;
//   - DeleteBinding writes one for the binding;
//   - PutInstance replacing an instance record whose PlanID differs
//     writes one for the old plan, ending now (a plan change by update).
//
// On memory, bolt and PostgreSQL the record is written in the same atomic
// step as the inventory change (one mutex, one transaction); on Redis a deletion's
// records are written by the script that deletes (compare-and-delete on
// the member read just before), and a plan change's record in a second
// round trip right after the put that changed the plan (a process that
// dies between the two loses that interval's plan: its hours then count
// to the next plan). Import writes none.
//
// A plan change's record keeps the instance's Created: the interval on a
// plan starts where the instance's previous interval ended (the record of
// the same instance and Created with the next earlier Deleted), or at
// Created for the first. A report clipped to a period needs only the
// records that end after its start: an interval whose predecessor ended
// before the period starts before it too.
//
// Records stay until PurgeUsage deletes those that ended before a time
// (the gateway passes now minus inventory.usage_retention). Each costs
// about 100 to 250 bytes, by backend (see docs/performance.md).

// UsageRecord is an instance's interval on one plan, or a binding's life,
// that ended: BindingID is empty for an instance.
type UsageRecord struct {
	// Tenant, Broker, ServiceID and PlanID are the record's at the end of
	// the interval (PlanID: the plan the interval was on).
	Tenant, Broker, ServiceID, PlanID string
	// InstanceID names the instance; BindingID the binding, or "".
	InstanceID, BindingID string
	// Created is the instance's (or binding's) Created; Deleted when the
	// interval ended (the deletion, or the plan change).
	Created, Deleted time.Time
}

// UsageStore is the part of a Store that keeps usage records. Its
// contract is the Store's (concurrency, contexts, errors).
type UsageStore interface {
	// UsageRecords yields the usage records of broker ("": every broker)
	// whose Deleted is after after, in no particular order. It reads a
	// page at a time (no snapshot: records written or purged meanwhile
	// may or may not appear). On an error it yields it once and stops.
	// Cost: bolt, Redis and PostgreSQL seek by Deleted (an index in time
	// order, per broker on Redis) and read only the records yielded; memory
	// compares every record.
	UsageRecords(ctx context.Context, broker string, after time.Time) iter.Seq2[UsageRecord, error]

	// PurgeUsage deletes the usage records whose Deleted is before before
	// and returns how many it deleted. It deletes in batches (one
	// transaction, one script each), so a long purge does not block
	// writers; on an error the records counted were deleted.
	PurgeUsage(ctx context.Context, before time.Time) (int, error)
}

// UsagePage is how many records UsageRecords and PurgeUsage handle per
// round trip or transaction.
const UsagePage = 1000

// usageFormat is the first byte of an encoded usage record.
const usageFormat = 1

// EncodeUsage encodes r without its Deleted (kept beside it: the bolt key's
// time, the Redis score):
//
//	format (1) | created (varint µs) | 6 × (uvarint length | bytes)
//
// the strings being Broker, InstanceID, BindingID, Tenant, ServiceID,
// PlanID.
func EncodeUsage(r UsageRecord) []byte {
	strs := [...]string{r.Broker, r.InstanceID, r.BindingID, r.Tenant, r.ServiceID, r.PlanID}
	n := 1 + binary.MaxVarintLen64
	for _, s := range strs {
		n += binary.MaxVarintLen32 + len(s)
	}
	b := make([]byte, 0, n)
	b = append(b, usageFormat)
	b = binary.AppendVarint(b, r.Created.UnixMicro())
	for _, s := range strs {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

var errBadUsage = errors.New("bad usage record")

// DecodeUsage decodes an EncodeUsage record ending at deleted
// (microseconds since 1970).
func DecodeUsage(b []byte, deleted int64) (UsageRecord, error) {
	if len(b) < 1 || b[0] != usageFormat {
		return UsageRecord{}, fmt.Errorf("%w: %w", ErrUnavailable, errBadUsage)
	}
	created, n := binary.Varint(b[1:])
	if n <= 0 {
		return UsageRecord{}, fmt.Errorf("%w: %w", ErrUnavailable, errBadUsage)
	}
	rest := b[1+n:]
	var strs [6]string
	for i := range strs {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l > uint64(len(rest)-n) {
			return UsageRecord{}, fmt.Errorf("%w: %w", ErrUnavailable, errBadUsage)
		}
		strs[i] = string(rest[n : n+int(l)])
		rest = rest[n+int(l):]
	}
	return UsageRecord{
		Broker: strs[0], InstanceID: strs[1], BindingID: strs[2], Tenant: strs[3], ServiceID: strs[4], PlanID: strs[5],
		Created: time.UnixMicro(created).UTC(), Deleted: time.UnixMicro(deleted).UTC(),
	}, nil
}

// instanceUsage is the usage record of a deleted (or replanned) instance.
func instanceUsage(in Instance, deleted time.Time) UsageRecord {
	return UsageRecord{Tenant: in.Tenant, Broker: in.Broker, ServiceID: in.ServiceID, PlanID: in.PlanID,
		InstanceID: in.InstanceID, Created: in.Created, Deleted: deleted.UTC().Truncate(time.Microsecond)}
}

// BindingUsage is the usage record of a deleted binding.
func BindingUsage(b Binding, deleted time.Time) UsageRecord {
	return UsageRecord{Tenant: b.Tenant, Broker: b.Broker, ServiceID: b.ServiceID, PlanID: b.PlanID,
		InstanceID: b.InstanceID, BindingID: b.BindingID, Created: b.Created, Deleted: deleted.UTC().Truncate(time.Microsecond)}
}

// DeletedUsage is the usage records of a DeleteInstance: the instance's
// (if it had a record) and its bindings'.
func DeletedUsage(broker, instanceID string, rec []byte, gone []Binding, now time.Time) ([]UsageRecord, error) {
	var out []UsageRecord
	if len(rec) > 0 {
		in, err := DecodeInstance(broker, instanceID, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, instanceUsage(in, now))
	}
	for _, b := range gone {
		out = append(out, BindingUsage(b, now))
	}
	return out, nil
}

// ReplanUsage returns the usage record a put of next over the stored
// instance record old writes: one when old is a record whose plan differs
// from next's, ending at now.
func ReplanUsage(old []byte, next Instance, now time.Time) (UsageRecord, bool, error) {
	if len(old) == 0 {
		return UsageRecord{}, false, nil
	}
	var plan string
	_, err := fields(old, func(tag byte, p []byte) error {
		if tag == tagPlanID {
			plan = string(p)
		}
		return nil
	})
	if err != nil {
		return UsageRecord{}, false, fmt.Errorf("%w: instance %s/%s: decode record: %w", ErrUnavailable, next.Broker, next.InstanceID, err)
	}
	if plan == next.PlanID {
		return UsageRecord{}, false, nil
	}
	in, err := DecodeInstance(next.Broker, next.InstanceID, old)
	if err != nil {
		return UsageRecord{}, false, err
	}
	return instanceUsage(in, now), true, nil
}
