package store

import (
	"cmp"
	"time"
)

// The index of bindings by ExpiresAt (ExpiringBindings, CountExpiring):
// what every backend shares, and the memory backend's. Bolt and Redis keep
// an index in the same atomic step as the binding records: a put adds or
// moves the binding's entry (or drops it when the new record has no
// ExpiresAt), a delete removes it; bindings without an ExpiresAt cost it
// nothing. The memory backend keeps each binding's ExpiresAt beside its
// record and walks them all (a comparison each: a few milliseconds for a
// million bindings, under its mutex).

// ExpiringArgs validates the arguments of ExpiringBindings and returns the
// page size.
func ExpiringArgs(broker string, limit int) (int, error) {
	if err := CheckName("broker", broker, false); err != nil {
		return 0, err
	}
	return listLimit(limit), nil
}

// ByExpiry orders bindings as ExpiringBindings returns them.
func ByExpiry(a, b Binding) int {
	return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), cmp.Compare(a.Broker, b.Broker),
		cmp.Compare(a.InstanceID, b.InstanceID), cmp.Compare(a.BindingID, b.BindingID))
}

// RecordExpiry reads the ExpiresAt of an encoded binding record (zero when
// it has none).
func RecordExpiry(rec []byte) (time.Time, error) {
	var t time.Time
	_, err := fields(rec, func(tag byte, p []byte) error {
		var err error
		if tag == tagExpiresAt {
			t, err = decodeTime(p)
		}
		return err
	})
	return t, err
}
