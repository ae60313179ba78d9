package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBoltValue round-trips instance values through encode and
// parseBoltValue (and payloadInstance, which reads their record); a value
// cut short is refused or reads as fewer bindings.
func TestBoltValue(t *testing.T) {
	opts := cmp.AllowUnexported(boltValue{}, bindingRef{})
	for _, v := range []boltValue{
		{instance: []byte("rec")},
		{instance: []byte{}, refs: []bindingRef{{"k2", 1 << 40}, {"k1", 1}}},
		{instance: []byte(strings.Repeat("r", 70_000)), refs: []bindingRef{{strings.Repeat("k", MaxIDLen), 300}}},
	} {
		p := v.encode()
		got, err := parseBoltValue("i1", p)
		if d := cmp.Diff(v, got, opts); err != nil || d != "" {
			t.Errorf("parseBoltValue(encode(%.20q)) = %v; diff (-want +got):\n%s", v.instance, err, d)
		}
		if inst, ok := payloadInstance(p); !ok || string(inst) != string(v.instance) {
			t.Errorf("payloadInstance(encode(%.20q)) = %.20q, %t", v.instance, inst, ok)
		}
		for n := range min(len(p), 64) { // refused, or fewer bindings
			got, err := parseBoltValue("i1", p[:n])
			if err != nil && !errors.Is(err, errBadMember) || err == nil && len(got.refs) >= len(v.refs) {
				t.Errorf("parseBoltValue of %d of %d bytes = %d bindings, %v; want %v", n, len(p), len(got.refs), err, errBadMember)
			}
		}
	}
}
