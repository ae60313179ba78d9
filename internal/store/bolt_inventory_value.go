package store

import (
	"encoding/binary"
	"fmt"
)

// The values of the bolt backend's inv_records. An instance's value is
//
//	u24(len(instance)) instance { u16(len(binding id)) binding id uvarint(seq) }...
//
// (big-endian lengths): the instance's record, empty while the inventory
// holds bindings of an instance it has no record of, then its bindings'
// ids and the sequence numbers of their values, in the order they were
// first stored. A binding's value is its record alone.

// boltValue is an instance's value, parsed.
type boltValue struct {
	instance []byte
	refs     []bindingRef
}

// bindingRef is a binding of an instance's value: its id and the sequence
// number of its record.
type bindingRef struct {
	id  string
	seq uint64
}

// parseBoltValue reads the value p of instance id. The record it returns
// is a slice of p.
func parseBoltValue(id string, p []byte) (boltValue, error) {
	bad := fmt.Errorf("%w of instance %q", errBadMember, id)
	if len(p) < 3 {
		return boltValue{}, bad
	}
	n := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
	if p = p[3:]; n > len(p) {
		return boltValue{}, bad
	}
	out := boltValue{instance: p[:n:n]}
	for p = p[n:]; len(p) > 0; {
		if len(p) < 2 {
			return boltValue{}, bad
		}
		bl := int(p[0])<<8 | int(p[1])
		if p = p[2:]; bl > len(p) {
			return boltValue{}, bad
		}
		bid := string(p[:bl])
		seq, l := binary.Uvarint(p[bl:])
		if l <= 0 {
			return boltValue{}, bad
		}
		out.refs = append(out.refs, bindingRef{bid, seq})
		p = p[bl+l:]
	}
	return out, nil
}

// encode is the value of v, in a new slice.
func (v boltValue) encode() []byte {
	n := 3 + len(v.instance)
	for _, r := range v.refs {
		n += 2 + len(r.id) + binary.MaxVarintLen64
	}
	p := append(make([]byte, 0, n), byte(len(v.instance)>>16), byte(len(v.instance)>>8), byte(len(v.instance)))
	p = append(p, v.instance...)
	for _, r := range v.refs {
		p = append(p, byte(len(r.id)>>8), byte(len(r.id)))
		p = append(p, r.id...)
		p = binary.AppendUvarint(p, r.seq)
	}
	return p
}

// binding returns the index of binding id in v, or -1.
func (v boltValue) binding(id string) int {
	for i, r := range v.refs {
		if r.id == id {
			return i
		}
	}
	return -1
}
