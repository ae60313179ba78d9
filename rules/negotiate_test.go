package rules

import (
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

func TestNegotiate(t *testing.T) {
	v := osb.MustParseVersion
	min, max := v("2.13"), v("2.15")
	for _, tc := range []struct {
		name    string
		vals    []string // nil sends none
		missing int
		want    Negotiated
		status  int    // of the refusal; 0: accepted
		desc    string // of the refusal
	}{
		{name: "missing", missing: 412, status: 412,
			desc: `X-Broker-API-Version header is missing; the broker "b1" accepts 2.13 to 2.15`},
		{name: "missing, the tenant answers 400", missing: 400, status: 400,
			desc: `X-Broker-API-Version header is missing; the broker "b1" accepts 2.13 to 2.15`},
		{name: "empty", vals: []string{""}, missing: 412, status: 412,
			desc: `X-Broker-API-Version header is missing; the broker "b1" accepts 2.13 to 2.15`},
		{name: "not MAJOR.MINOR", vals: []string{"latest"}, status: 412,
			desc: `X-Broker-API-Version "latest" is not of the form MAJOR.MINOR; the broker "b1" accepts 2.13 to 2.15`},
		{name: "three parts", vals: []string{"2.14.1"}, status: 412,
			desc: `X-Broker-API-Version "2.14.1" is not of the form MAJOR.MINOR; the broker "b1" accepts 2.13 to 2.15`},
		{name: "major 3", vals: []string{"3.0"}, status: 412,
			desc: `X-Broker-API-Version 3.0 has major version 3; the broker "b1" accepts 2.13 to 2.15`},
		{name: "below the minimum", vals: []string{"2.8"}, status: 412,
			desc: `X-Broker-API-Version 2.8 is below 2.13, the lowest the broker "b1" accepts`},
		{name: "sent twice", vals: []string{"2.14", "2.15"}, status: 412,
			desc: `X-Broker-API-Version was sent 2 times; expected one MAJOR.MINOR value the broker "b1" accepts (2.13 to 2.15)`},
		{name: "minimum", vals: []string{"2.13"}, want: Negotiated{Platform: v("2.13"), Broker: v("2.13")}},
		{name: "inside the range", vals: []string{"2.14"}, want: Negotiated{Platform: v("2.14"), Broker: v("2.14")}},
		{name: "maximum", vals: []string{"2.15"}, want: Negotiated{Platform: v("2.15"), Broker: v("2.15")}},
		{name: "above the maximum is capped", vals: []string{"2.17"}, want: Negotiated{Platform: v("2.17"), Broker: max, Capped: true}},
		{name: "far above is capped", vals: []string{"2.99"}, want: Negotiated{Platform: v("2.99"), Broker: max, Capped: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Negotiate(tc.vals, min, max, tc.missing, "b1")
			if tc.status == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("Negotiate mismatch (-want +got):\n%s", diff)
				}
				return
			}
			var e *osb.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v, want an *osb.Error", err)
			}
			if e.Status != tc.status || e.Code != "" || e.Description != tc.desc {
				t.Errorf("refusal %d %q %q,\nwant %d %q", e.Status, e.Code, e.Description, tc.status, tc.desc)
			}
		})
	}
}

func TestNegotiateAllocs(t *testing.T) {
	vals := []string{"2.17"}
	if n := testing.AllocsPerRun(100, func() {
		_, _ = Negotiate(vals, osb.Version{Major: 2, Minor: 13}, osb.Version{Major: 2, Minor: 15}, http.StatusPreconditionFailed, "b1")
	}); n != 0 {
		t.Errorf("Negotiate of an accepted version: %v allocations, want 0", n)
	}
}
