package rules

import (
	"net/http"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// TestNotOwnedTable: each endpoint that names an instance has its answer
// for another tenant's instance, per version where the specification's
// answers differ; the description names the caller, never the owner.
func TestNotOwnedTable(t *testing.T) {
	v213, v214 := osb.Version{Major: 2, Minor: 13}, osb.Version{Major: 2, Minor: 14}
	for _, tc := range []struct {
		e            Endpoint
		binding      string
		at213, at214 int
	}{
		{Provision, "", http.StatusConflict, http.StatusConflict},
		{Update, "", http.StatusBadRequest, http.StatusNotFound},
		{Deprovision, "", http.StatusGone, http.StatusGone},
		{GetInstance, "", http.StatusNotFound, http.StatusNotFound},
		{InstanceLastOperation, "", http.StatusGone, http.StatusGone},
		{Bind, "b", http.StatusBadRequest, http.StatusNotFound},
		{Unbind, "b", http.StatusGone, http.StatusGone},
		{GetBinding, "b", http.StatusNotFound, http.StatusNotFound},
		{BindingLastOperation, "b", http.StatusGone, http.StatusGone},
	} {
		c := Call{Endpoint: tc.e, InstanceID: "i", BindingID: tc.binding}
		for v, want := range map[osb.Version]int{v213: tc.at213, v214: tc.at214} {
			e := NotOwned(c, v, "dev", "shared")
			if e.Status != want {
				t.Errorf("NotOwned(%s) at %s = %d, want %d", tc.e, v, e.Status, want)
			}
			if tc.e != Provision && !strings.Contains(e.Description, `tenant "dev" holds no service instance "i"`) {
				t.Errorf("NotOwned(%s): description %q", tc.e, e.Description)
			}
			if !strings.Contains(e.Description, `"shared"`) || e.Code != "" {
				t.Errorf("NotOwned(%s): %+v", tc.e, e)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("NotOwned(Catalog) did not panic")
		}
	}()
	NotOwned(Call{Endpoint: Catalog}, v214, "dev", "shared")
}
