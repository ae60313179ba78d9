package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMemberPayload round-trips values through payload and parsePayload
// (and a Redis member through ParseMember); a value cut short is refused
// or reads as fewer bindings.
func TestMemberPayload(t *testing.T) {
	opts := cmp.AllowUnexported(Member{}, MemberBinding{})
	for _, m := range []Member{
		{ID: "i1", Instance: []byte("rec")},
		{ID: "i1", Instance: []byte{}, Bindings: []MemberBinding{{"k2", []byte("b2")}, {"k1", []byte{}}}},
		{ID: "i1", Instance: []byte(strings.Repeat("r", 70_000)),
			Bindings: []MemberBinding{{strings.Repeat("k", MaxIDLen), []byte(strings.Repeat("b", 70_000))}}},
	} {
		p := m.payload()
		got, err := parsePayload(m.ID, p)
		if d := cmp.Diff(m, got, opts); err != nil || d != "" {
			t.Errorf("parsePayload(payload(%.20q)) = %v; diff (-want +got):\n%s", m.Instance, err, d)
		}
		if inst, ok := PayloadInstance(p); !ok || string(inst) != string(m.Instance) {
			t.Errorf("payloadInstance(payload(%.20q)) = %.20q, %t", m.Instance, inst, ok)
		}
		got, err = ParseMember(m.ID + "\x00" + string(p))
		if d := cmp.Diff(m, got, opts); err != nil || d != "" {
			t.Errorf("parseMember(%.20q) = %v; diff (-want +got):\n%s", m.Instance, err, d)
		}
		for n := range min(len(p), 64) { // refused, or fewer bindings
			got, err := parsePayload(m.ID, p[:n])
			if err != nil && !errors.Is(err, ErrBadMember) || err == nil && len(got.Bindings) >= len(m.Bindings) {
				t.Errorf("parsePayload of %d of %d bytes = %d bindings, %v; want %v", n, len(p), len(got.Bindings), err, ErrBadMember)
			}
		}
	}
}
