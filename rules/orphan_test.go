package rules

import "testing"

func TestOrphanCandidate(t *testing.T) {
	prov, bind, upd := Call{Endpoint: Provision}, Call{Endpoint: Bind}, Call{Endpoint: Update}
	for _, tc := range []struct {
		name   string
		c      Call
		status int
		body   string
		want   bool
	}{
		{"200", prov, 200, `{}`, false},
		{"200 malformed", prov, 200, `{`, false},
		{"201 well formed", prov, 201, `{}`, false},
		{"201 malformed", prov, 201, `{`, true},
		{"201 not an object", bind, 201, `[]`, true},
		{"202 malformed", prov, 202, `nope`, true},
		{"202 well formed", bind, 202, `{"operation":"x"}`, false},
		{"204", prov, 204, ``, true},
		{"400", prov, 400, `{}`, false},
		{"408", prov, 408, `{}`, false},
		{"409", bind, 409, `{}`, false},
		{"422 ConcurrencyError", prov, 422, `{"error":"ConcurrencyError"}`, false},
		{"500", prov, 500, `{}`, true},
		{"503", bind, 503, ``, true},
		{"update 500 is never mitigated", upd, 500, `{}`, false},
	} {
		got, why := OrphanCandidate(tc.c, ReadResponse(tc.c, tc.status, []byte(tc.body)))
		if got != tc.want || (got && why == "") {
			t.Errorf("%s: %v %q, want %v", tc.name, got, why, tc.want)
		}
	}
	if ok, why := OrphanOnTimeout(prov); !ok || why == "" {
		t.Error("a provision timeout is a candidate")
	}
	if ok, _ := OrphanOnTimeout(upd); ok {
		t.Error("an update timeout is not")
	}
}
