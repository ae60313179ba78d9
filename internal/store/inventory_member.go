package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// An instance and its bindings as one value, as the Redis backend keeps
// them in a member of ix (after the id and a NUL):
//
//	u24(len(instance)) instance { u16(len(binding id)) binding id u24(len(record)) record }...
//
// (big-endian lengths; records are at most MaxRecordLen, ids MaxIDLen):
// the instance's record, empty while the inventory holds bindings of an
// instance it has no record of, then its bindings in the order they were
// first stored. One value per instance instead of one per binding spends
// one entry of the sorted set and one copy of the instance id per
// instance: an instance has tens of bindings, not thousands, so a binding
// is read and written by reading and rewriting its instance's value. (The
// bolt backend keeps its records in values of their own, and the
// instance's lists its bindings': internal/store/bolt's
// inventory_value.go; it decodes them as a member to list them.)

// Member is such a value, parsed: the instance id, its record (empty if
// the inventory has none) and its bindings' ids and records, in the
// order they are stored.
type Member struct {
	// ID is the instance id.
	ID string
	// Instance is the instance's record, empty if the inventory has none.
	Instance []byte
	// Bindings are the instance's bindings, in the order first stored.
	Bindings []MemberBinding
}

// MemberBinding is one binding of a Member: its id and its record.
type MemberBinding struct {
	ID  string
	Rec []byte
}

// ErrBadMember is wrapped by the errors of a member or value that does not
// parse, with ErrUnavailable where a backend reads one.
var ErrBadMember = errors.New("bad inventory member")

// ParseMember reads a member of the Redis backend's ix: the id, a NUL and
// the value. The records it returns are its own.
func ParseMember(m string) (Member, error) {
	id, rest, ok := strings.Cut(m, "\x00")
	if !ok {
		return Member{}, BadKey([]byte(m))
	}
	return parsePayload(id, []byte(rest))
}

// parsePayload reads the value of instance id. The records it returns are
// slices of p.
func parsePayload(id string, p []byte) (Member, error) {
	bad := fmt.Errorf("%w of instance %q", ErrBadMember, id)
	u24 := func() (int, bool) {
		if len(p) < 3 {
			return 0, false
		}
		n := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
		p = p[3:]
		return n, n <= len(p)
	}
	n, ok := u24()
	if !ok {
		return Member{}, bad
	}
	out := Member{ID: id, Instance: p[:n:n]}
	for p = p[n:]; len(p) > 0; {
		if len(p) < 2 {
			return Member{}, bad
		}
		bl := int(p[0])<<8 | int(p[1])
		if p = p[2:]; bl > len(p) {
			return Member{}, bad
		}
		bid := string(p[:bl])
		p = p[bl:]
		rl, ok := u24()
		if !ok {
			return Member{}, bad
		}
		out.Bindings = append(out.Bindings, MemberBinding{bid, p[:rl:rl]})
		p = p[rl:]
	}
	return out, nil
}

// payload is the value of m, in a new slice.
func (m Member) payload() []byte {
	n := 3 + len(m.Instance)
	for _, b := range m.Bindings {
		n += 2 + len(b.ID) + 3 + len(b.Rec)
	}
	u24 := func(p []byte, n int) []byte { return append(p, byte(n>>16), byte(n>>8), byte(n)) }
	p := u24(make([]byte, 0, n), len(m.Instance))
	p = append(p, m.Instance...)
	for _, b := range m.Bindings {
		p = append(p, byte(len(b.ID)>>8), byte(len(b.ID)))
		p = append(p, b.ID...)
		p = u24(p, len(b.Rec))
		p = append(p, b.Rec...)
	}
	return p
}

// Binding returns the index of binding id in m, or -1.
func (m Member) Binding(id string) int {
	return slices.IndexFunc(m.Bindings, func(b MemberBinding) bool { return b.ID == id })
}

// SortedBindings decodes the bindings of m in order of their ids (m keeps
// its order).
func (m Member) SortedBindings(broker string) ([]Binding, error) {
	sorted := slices.SortedFunc(slices.Values(m.Bindings), func(a, b MemberBinding) int { return strings.Compare(a.ID, b.ID) })
	out := make([]Binding, 0, len(sorted))
	for _, b := range sorted {
		bd, err := DecodeBinding(broker, m.ID, b.ID, b.Rec)
		if err != nil {
			return nil, err
		}
		out = append(out, bd)
	}
	return out, nil
}

// PayloadInstance returns the instance record of the value p (empty if
// the inventory has none) without reading the bindings.
func PayloadInstance(p []byte) ([]byte, bool) {
	if len(p) < 3 {
		return nil, false
	}
	n := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
	if n > len(p)-3 {
		return nil, false
	}
	return p[3 : 3+n : 3+n], true
}
