package bolt

import (
	"encoding/binary"
	"fmt"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The values of the bolt backend's inv_values. An instance's value is
//
//	u24(len(instance)) instance { uvarint(seq) }...
//
// (a big-endian length): the instance's record, empty while the inventory
// holds bindings of an instance it has no record of, then the sequence
// numbers of its bindings' values, in the order they were first stored. A
// binding's value is
//
//	uvarint(len(binding id)) binding id record

// boltValue is an instance's value, parsed.
type boltValue struct {
	instance []byte
	bindings []uint64
}

// parseBoltValue reads the value p of instance id. The record it returns
// is a slice of p.
func parseBoltValue(id string, p []byte) (boltValue, error) {
	bad := fmt.Errorf("%w of instance %q", store.ErrBadMember, id)
	if len(p) < 3 {
		return boltValue{}, bad
	}
	n := int(p[0])<<16 | int(p[1])<<8 | int(p[2])
	if p = p[3:]; n > len(p) {
		return boltValue{}, bad
	}
	out := boltValue{instance: p[:n:n]}
	for p = p[n:]; len(p) > 0; {
		seq, l := binary.Uvarint(p)
		if l <= 0 {
			return boltValue{}, bad
		}
		out.bindings = append(out.bindings, seq)
		p = p[l:]
	}
	return out, nil
}

// encode is the value of v, in a new slice.
func (v boltValue) encode() []byte {
	p := make([]byte, 0, 3+len(v.instance)+len(v.bindings)*binary.MaxVarintLen64)
	p = append(p, byte(len(v.instance)>>16), byte(len(v.instance)>>8), byte(len(v.instance)))
	p = append(p, v.instance...)
	for _, seq := range v.bindings {
		p = binary.AppendUvarint(p, seq)
	}
	return p
}

// bindingValue is the value of binding id with record rec.
func bindingValue(id string, rec []byte) []byte {
	p := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen16+len(id)+len(rec)), uint64(len(id)))
	return append(append(p, id...), rec...)
}

// parseBindingValue reads a binding's value p: its id and record, slices
// of p.
func parseBindingValue(p []byte) (id, rec []byte, ok bool) {
	n, l := binary.Uvarint(p)
	if l <= 0 || n > uint64(len(p)-l) {
		return nil, nil, false
	}
	return p[l : l+int(n)], p[l+int(n):], true
}
