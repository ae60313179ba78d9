package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMemberPayload round-trips values through payload and parsePayload
// (and a Redis member through parseMember); a value cut short is refused
// or reads as fewer bindings.
func TestMemberPayload(t *testing.T) {
	opts := cmp.AllowUnexported(member{}, memberBinding{})
	for _, m := range []member{
		{id: "i1", instance: []byte("rec")},
		{id: "i1", instance: []byte{}, bindings: []memberBinding{{"k2", []byte("b2")}, {"k1", []byte{}}}},
		{id: "i1", instance: []byte(strings.Repeat("r", 70_000)),
			bindings: []memberBinding{{strings.Repeat("k", MaxIDLen), []byte(strings.Repeat("b", 70_000))}}},
	} {
		p := m.payload()
		got, err := parsePayload(m.id, p)
		if d := cmp.Diff(m, got, opts); err != nil || d != "" {
			t.Errorf("parsePayload(payload(%.20q)) = %v; diff (-want +got):\n%s", m.instance, err, d)
		}
		if inst, ok := payloadInstance(p); !ok || string(inst) != string(m.instance) {
			t.Errorf("payloadInstance(payload(%.20q)) = %.20q, %t", m.instance, inst, ok)
		}
		got, err = parseMember(m.id + "\x00" + string(p))
		if d := cmp.Diff(m, got, opts); err != nil || d != "" {
			t.Errorf("parseMember(%.20q) = %v; diff (-want +got):\n%s", m.instance, err, d)
		}
		for n := range min(len(p), 64) { // refused, or fewer bindings
			got, err := parsePayload(m.id, p[:n])
			if err != nil && !errors.Is(err, errBadMember) || err == nil && len(got.bindings) >= len(m.bindings) {
				t.Errorf("parsePayload of %d of %d bytes = %d bindings, %v; want %v", n, len(p), len(got.bindings), err, errBadMember)
			}
		}
	}
}
