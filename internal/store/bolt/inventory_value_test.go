package bolt

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// TestBoltValue round-trips instance values through encode and
// parseBoltValue (and payloadInstance, which reads their record); a value
// cut short is refused or reads as fewer bindings.
func TestBoltValue(t *testing.T) {
	opts := cmp.AllowUnexported(boltValue{})
	for _, v := range []boltValue{
		{instance: []byte("rec")},
		{instance: []byte{}, bindings: []uint64{1 << 40, 1}},
		{instance: []byte(strings.Repeat("r", 70_000)), bindings: []uint64{300}},
	} {
		p := v.encode()
		got, err := parseBoltValue("i1", p)
		if d := cmp.Diff(v, got, opts); err != nil || d != "" {
			t.Errorf("parseBoltValue(encode(%.20q)) = %v; diff (-want +got):\n%s", v.instance, err, d)
		}
		if inst, ok := store.PayloadInstance(p); !ok || string(inst) != string(v.instance) {
			t.Errorf("payloadInstance(encode(%.20q)) = %.20q, %t", v.instance, inst, ok)
		}
		for n := range min(len(p), 64) { // refused, or fewer bindings
			got, err := parseBoltValue("i1", p[:n])
			if err != nil && !errors.Is(err, store.ErrBadMember) || err == nil && len(got.bindings) >= len(v.bindings) {
				t.Errorf("parseBoltValue of %d of %d bytes = %d bindings, %v; want %v", n, len(p), len(got.bindings), err, store.ErrBadMember)
			}
		}
	}
}

// TestBoltBindingValue round-trips bindings' values; a value cut short
// in its id is refused.
func TestBoltBindingValue(t *testing.T) {
	for _, b := range []struct{ id, rec string }{
		{"k1", "rec"}, {"k1", ""}, {strings.Repeat("k", store.MaxIDLen), strings.Repeat("b", 70_000)},
	} {
		p := bindingValue(b.id, []byte(b.rec))
		id, rec, ok := parseBindingValue(p)
		if !ok || string(id) != b.id || string(rec) != b.rec {
			t.Errorf("parseBindingValue(bindingValue(%.20q, %.20q)) = %.20q, %.20q, %t", b.id, b.rec, id, rec, ok)
		}
		for n := range min(len(p), len(b.id)+1) {
			if id, _, ok := parseBindingValue(p[:n]); ok {
				t.Errorf("parseBindingValue of %d of %d bytes = %.20q, true; want false", n, len(p), id)
			}
		}
	}
}
