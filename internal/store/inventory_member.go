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
// instance's lists its bindings': bolt_inventory_value.go; it decodes them
// as a member to list them.)

// member is such a value, parsed: the instance id, its record (empty if
// the inventory has none) and its bindings' ids and records, in the
// order they are stored.
type member struct {
	id       string
	instance []byte
	bindings []memberBinding
}

type memberBinding struct {
	id  string
	rec []byte
}

var errBadMember = errors.New("bad inventory member")

// parseMember reads a member of the Redis backend's ix: the id, a NUL and
// the value. The records it returns are its own.
func parseMember(m string) (member, error) {
	id, rest, ok := strings.Cut(m, "\x00")
	if !ok {
		return member{}, badKey([]byte(m))
	}
	return parsePayload(id, []byte(rest))
}

// parsePayload reads the value of instance id. The records it returns are
// slices of p.
func parsePayload(id string, p []byte) (member, error) {
	bad := fmt.Errorf("%w of instance %q", errBadMember, id)
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
		return member{}, bad
	}
	out := member{id: id, instance: p[:n:n]}
	for p = p[n:]; len(p) > 0; {
		if len(p) < 2 {
			return member{}, bad
		}
		bl := int(p[0])<<8 | int(p[1])
		if p = p[2:]; bl > len(p) {
			return member{}, bad
		}
		bid := string(p[:bl])
		p = p[bl:]
		rl, ok := u24()
		if !ok {
			return member{}, bad
		}
		out.bindings = append(out.bindings, memberBinding{bid, p[:rl:rl]})
		p = p[rl:]
	}
	return out, nil
}

// payload is the value of m, in a new slice.
func (m member) payload() []byte {
	n := 3 + len(m.instance)
	for _, b := range m.bindings {
		n += 2 + len(b.id) + 3 + len(b.rec)
	}
	u24 := func(p []byte, n int) []byte { return append(p, byte(n>>16), byte(n>>8), byte(n)) }
	p := u24(make([]byte, 0, n), len(m.instance))
	p = append(p, m.instance...)
	for _, b := range m.bindings {
		p = append(p, byte(len(b.id)>>8), byte(len(b.id)))
		p = append(p, b.id...)
		p = u24(p, len(b.rec))
		p = append(p, b.rec...)
	}
	return p
}

// binding returns the index of binding id in m, or -1.
func (m member) binding(id string) int {
	return slices.IndexFunc(m.bindings, func(b memberBinding) bool { return b.id == id })
}

// sortedBindings decodes the bindings of m in order of their ids (m keeps
// its order).
func (m member) sortedBindings(broker string) ([]Binding, error) {
	sorted := slices.SortedFunc(slices.Values(m.bindings), func(a, b memberBinding) int { return strings.Compare(a.id, b.id) })
	out := make([]Binding, 0, len(sorted))
	for _, b := range sorted {
		bd, err := decodeBinding(broker, m.id, b.id, b.rec)
		if err != nil {
			return nil, err
		}
		out = append(out, bd)
	}
	return out, nil
}

// payloadInstance returns the instance record of the value p (empty if
// the inventory has none) without reading the bindings.
func payloadInstance(p []byte) ([]byte, bool) {
	if len(p) < 3 {
		return nil, false
	}
	n := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
	if n > len(p)-3 {
		return nil, false
	}
	return p[3 : 3+n : 3+n], true
}
