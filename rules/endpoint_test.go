package rules

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

func TestEndpointProperties(t *testing.T) {
	type props struct {
		Name                        string
		Mutating, Instance, Binding bool
		ChecksCatalog               bool
		Since                       osb.Version
	}
	tests := []struct {
		e    Endpoint
		want props
	}{
		{Unknown, props{Name: "unknown"}},
		{Catalog, props{Name: "catalog", Since: v2_0}},
		{Provision, props{Name: "provision", Mutating: true, Instance: true, ChecksCatalog: true, Since: v2_0}},
		{Update, props{Name: "update", Mutating: true, Instance: true, ChecksCatalog: true, Since: v2_0}},
		{Deprovision, props{Name: "deprovision", Mutating: true, Instance: true, Since: v2_0}},
		{GetInstance, props{Name: "get_instance", Instance: true, Since: v2_14}},
		{InstanceLastOperation, props{Name: "instance_last_operation", Instance: true, Since: v2_0}},
		{Bind, props{Name: "bind", Mutating: true, Instance: true, Binding: true, ChecksCatalog: true, Since: v2_0}},
		{Unbind, props{Name: "unbind", Mutating: true, Instance: true, Binding: true, Since: v2_0}},
		{GetBinding, props{Name: "get_binding", Instance: true, Binding: true, Since: v2_14}},
		{BindingLastOperation, props{Name: "binding_last_operation", Instance: true, Binding: true, Since: v2_14}},
		{Endpoint(200), props{Name: "unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.want.Name, func(t *testing.T) {
			got := props{tt.e.String(), tt.e.Mutating(), tt.e.Instance(), tt.e.Binding(), tt.e.ChecksCatalog(), tt.e.Since()}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Endpoint(%d) mismatch (-want +got):\n%s", uint8(tt.e), diff)
			}
		})
	}
}

// TestEndpointTable checks the table's own invariants: every endpoint has a
// route and a method, and no two endpoints share a name or a (route, method).
func TestEndpointTable(t *testing.T) {
	names := map[string]Endpoint{}
	type key struct {
		r      routeID
		method string
	}
	calls := map[key]Endpoint{}
	for i, info := range endpoints {
		e := Endpoint(i)
		if prev, ok := names[info.name]; ok {
			t.Errorf("%d and %d share the name %q", prev, e, info.name)
		}
		names[info.name] = e
		if e == Unknown {
			continue
		}
		if info.route == noRoute || info.method == "" || info.since.IsZero() {
			t.Errorf("%v has no route, method or version: %+v", e, info)
		}
		k := key{info.route, info.method}
		if prev, ok := calls[k]; ok {
			t.Errorf("%v and %v are both %s %s", prev, e, info.method, info.route.pattern())
		}
		calls[k] = e
	}
}

func TestCheckVersion(t *testing.T) {
	v := osb.MustParseVersion
	tests := []struct {
		name    string
		call    Call
		version osb.Version
		wantErr string // 412 description; empty for success
	}{
		{name: "catalog at 2.0", call: Call{Endpoint: Catalog}, version: v("2.0")},
		{name: "provision async at 2.4", call: Call{Endpoint: Provision, AcceptsIncomplete: true}, version: v("2.4")},
		{name: "bind sync at 2.8", call: Call{Endpoint: Bind}, version: v("2.8")},
		{name: "unbind sync at 2.13", call: Call{Endpoint: Unbind}, version: v("2.13")},
		{name: "bind async at 2.14", call: Call{Endpoint: Bind, AcceptsIncomplete: true}, version: v("2.14")},
		{name: "unbind async at 2.17", call: Call{Endpoint: Unbind, AcceptsIncomplete: true}, version: v("2.17")},
		{name: "get instance at 2.14", call: Call{Endpoint: GetInstance}, version: v("2.14")},
		{name: "get binding at 2.15", call: Call{Endpoint: GetBinding}, version: v("2.15")},
		{name: "binding last_operation at 2.14", call: Call{Endpoint: BindingLastOperation}, version: v("2.14")},
		{name: "get binding at 3.0", call: Call{Endpoint: GetBinding}, version: v("3.0")},
		{name: "unknown passes", call: Call{}, version: v("2.0")},

		{name: "get binding at 2.13", call: Call{Endpoint: GetBinding}, version: v("2.13"),
			wantErr: "GET binding needs X-Broker-API-Version 2.14 or later; the request has 2.13"},
		{name: "get instance at 2.9", call: Call{Endpoint: GetInstance}, version: v("2.9"),
			wantErr: "GET instance needs X-Broker-API-Version 2.14 or later; the request has 2.9"},
		{name: "binding last_operation at 2.13", call: Call{Endpoint: BindingLastOperation}, version: v("2.13"),
			wantErr: "GET binding last_operation needs X-Broker-API-Version 2.14 or later; the request has 2.13"},
		{name: "bind async at 2.13", call: Call{Endpoint: Bind, AcceptsIncomplete: true}, version: v("2.13"),
			wantErr: "asynchronous PUT binding (accepts_incomplete=true) needs X-Broker-API-Version 2.14 or later; the request has 2.13"},
		{name: "unbind async at 2.8", call: Call{Endpoint: Unbind, AcceptsIncomplete: true}, version: v("2.8"),
			wantErr: "asynchronous DELETE binding (accepts_incomplete=true) needs X-Broker-API-Version 2.14 or later; the request has 2.8"},
		{name: "catalog at 1.9", call: Call{Endpoint: Catalog}, version: v("1.9"),
			wantErr: "GET catalog needs X-Broker-API-Version 2.0 or later; the request has 1.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckVersion(tt.call, tt.version)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckVersion(%+v, %v) = %v, want nil", tt.call, tt.version, err)
				}
				return
			}
			want := &osb.Error{Status: http.StatusPreconditionFailed, Description: tt.wantErr}
			if diff := cmp.Diff(want, osb.AsError(err)); diff != "" {
				t.Errorf("CheckVersion(%+v, %v) mismatch (-want +got):\n%s", tt.call, tt.version, diff)
			}
		})
	}
}

// TestCheckVersionEveryEndpoint runs every classified endpoint, synchronous
// and asynchronous, against the versions around 2.14.
func TestCheckVersionEveryEndpoint(t *testing.T) {
	for i := range endpoints {
		e := Endpoint(i)
		if e == Unknown {
			continue
		}
		for _, async := range []bool{false, true} {
			since := e.Since()
			if async && !e.info().asyncSince.IsZero() {
				since = e.info().asyncSince
			}
			for _, ver := range []osb.Version{{Major: 2, Minor: 13}, {Major: 2, Minor: 14}} {
				err := CheckVersion(Call{Endpoint: e, AcceptsIncomplete: async}, ver)
				if wantOK := ver.AtLeast(since); wantOK != (err == nil) {
					t.Errorf("CheckVersion(%v, async %v, %v) = %v; want ok %v", e, async, ver, err, wantOK)
				}
			}
		}
	}
}
