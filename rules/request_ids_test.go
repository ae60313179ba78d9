package rules

import "testing"

func TestRequestIDs(t *testing.T) {
	for _, tc := range []struct {
		name, body, service, plan string
	}{
		{"both", `{"service_id":"s","plan_id":"p","organization_guid":"o"}`, "s", "p"},
		{"keys in any case, as a broker in Go reads them", `{"SERVICE_ID":"s","Plan_Id":"p"}`, "s", "p"},
		{"the last of two", `{"plan_id":"p1","plan_id":"p2"}`, "", "p2"},
		{"escaped", `{"plan_id":"p\u002d1"}`, "", "p-1"},
		{"not a string", `{"service_id":1,"plan_id":"p"}`, "", "p"},
		{"not an object", `["s","p"]`, "", ""},
		{"not JSON", `{"plan_id":"p"`, "", ""},
		{"empty", ``, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s, p := RequestIDs([]byte(tc.body)); s != tc.service || p != tc.plan {
				t.Errorf("RequestIDs = %q, %q; want %q, %q", s, p, tc.service, tc.plan)
			}
		})
	}
}
