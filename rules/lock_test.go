package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

func TestLockTable(t *testing.T) {
	for _, tc := range []struct {
		e     Endpoint
		kind  string
		check LockCheck
	}{
		{Catalog, "", CheckNothing},
		{Provision, "provision", CheckNothing},
		{Update, "update", CheckBindings},
		{Deprovision, "deprovision", CheckBindings},
		{GetInstance, "", CheckNothing},
		{InstanceLastOperation, "", CheckNothing},
		{Bind, "bind", CheckInstance},
		{Unbind, "unbind", CheckInstance},
		{GetBinding, "", CheckNothing},
		{BindingLastOperation, "", CheckNothing},
		{Unknown, "", CheckNothing},
		{Endpoint(200), "", CheckNothing},
	} {
		kind, ok := LockKind(tc.e)
		if kind != tc.kind || ok != (tc.kind != "") || ok != tc.e.Mutating() {
			t.Errorf("LockKind(%s) = %q, %v; want %q", tc.e, kind, ok, tc.kind)
		}
		if !ok {
			continue
		}
		if got := LockedBy(kind); got != tc.e {
			t.Errorf("LockedBy(%q) = %s, want %s", kind, got, tc.e)
		}
		if got := LockChecks(kind); got != tc.check {
			t.Errorf("LockChecks(%q) = %d, want %d", kind, got, tc.check)
		}
	}
	if LockedBy("") != Unknown || LockedBy("catalog") != Unknown || LockChecks("nope") != CheckNothing {
		t.Error("an unknown kind is locked by no endpoint and checks nothing")
	}
}

func TestBusy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		version string
		spec    bool
		want    osb.Error
	}{
		{"blocking at 2.15", "2.15", false, osb.Error{Status: 400, Description: InProgress}},
		{"spec at 2.13", "2.13", true, osb.Error{Status: 400, Description: InProgress}},
		{"spec at 2.14", "2.14", true, osb.Error{Status: 422, Code: osb.CodeConcurrencyError, Description: InProgress}},
		{"spec at 2.17", "2.17", true, osb.Error{Status: 422, Code: osb.CodeConcurrencyError, Description: InProgress}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, *Busy(osb.MustParseVersion(tc.version), tc.spec)); diff != "" {
				t.Errorf("Busy mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
