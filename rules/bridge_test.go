package rules

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

func TestBridge(t *testing.T) {
	v2_11, v2_15 := osb.MustParseVersion("2.11"), osb.MustParseVersion("2.15")
	tests := []struct {
		name      string
		call      Call
		platform  osb.Version // zero: 2.17
		brokerMax osb.Version
		body      string
		want      string // "" when the body must come back unchanged
	}{
		{name: "provision adds org and space", call: provisionCall, brokerMax: v2_11,
			body: `{"service_id":"s","plan_id":"p","context":{"platform":"cloudfoundry","organization_guid":"o-1","space_guid":"sp-1"}}`,
			want: `{"service_id":"s","plan_id":"p","context":{"platform":"cloudfoundry","organization_guid":"o-1","space_guid":"sp-1"},"organization_guid":"o-1","space_guid":"sp-1"}`},
		{name: "provision keeps formatting and order", call: provisionCall, brokerMax: osb.MustParseVersion("2.8"),
			body: "{\n  \"plan_id\": \"p\",\n  \"context\": {\"space_guid\": \"sp\\u002d1\", \"organization_guid\": \"o-1\"},\n  \"parameters\": {\"b\": 1.50, \"a\": \"<x>\"}\n}\n",
			want: "{\n  \"plan_id\": \"p\",\n  \"context\": {\"space_guid\": \"sp\\u002d1\", \"organization_guid\": \"o-1\"},\n  \"parameters\": {\"b\": 1.50, \"a\": \"<x>\"},\"organization_guid\":\"o-1\",\"space_guid\":\"sp\\u002d1\"\n}\n"},
		{name: "provision adds only what is missing", call: provisionCall, brokerMax: v2_11,
			body: `{"organization_guid":"o-top","context":{"organization_guid":"o-ctx","space_guid":"sp-1"}}`,
			want: `{"organization_guid":"o-top","context":{"organization_guid":"o-ctx","space_guid":"sp-1"},"space_guid":"sp-1"}`},
		{name: "provision replaces null", call: provisionCall, brokerMax: v2_11,
			body: `{"organization_guid":null,"space_guid":"sp-top","context":{"organization_guid":"o-1","space_guid":"sp-1"}}`,
			want: `{"organization_guid":"o-1","space_guid":"sp-top","context":{"organization_guid":"o-1","space_guid":"sp-1"}}`},
		{name: "provision with both present is unchanged", call: provisionCall, brokerMax: v2_11,
			body: `{"organization_guid":"o","space_guid":"s","context":{"organization_guid":"o","space_guid":"s"}}`},
		{name: "provision without context is unchanged", call: provisionCall, brokerMax: v2_11,
			body: `{"service_id":"s","plan_id":"p"}`},
		{name: "provision context without guids is unchanged", call: provisionCall, brokerMax: v2_11,
			body: `{"context":{"platform":"kubernetes","namespace":"default"}}`},
		{name: "provision context guid not a string is unchanged", call: provisionCall, brokerMax: v2_11,
			body: `{"context":{"organization_guid":1,"space_guid":""}}`},
		{name: "provision context not an object is unchanged", call: provisionCall, brokerMax: v2_11,
			body: `{"context":"cf"}`},
		{name: "provision for a 2.12 broker is unchanged", call: provisionCall, brokerMax: osb.MustParseVersion("2.12"),
			body: `{"context":{"organization_guid":"o","space_guid":"s"}}`},
		{name: "update fills previous_values", call: updateCall, brokerMax: v2_11,
			body: `{"service_id":"s","context":{"organization_guid":"o","space_guid":"sp"},"previous_values":{"plan_id":"p"}}`,
			want: `{"service_id":"s","context":{"organization_guid":"o","space_guid":"sp"},"previous_values":{"plan_id":"p","organization_id":"o","space_id":"sp"}}`},
		{name: "update fills empty previous_values", call: updateCall, brokerMax: v2_11,
			body: `{"context":{"organization_guid":"o","space_guid":"sp"},"previous_values":{ }}`,
			want: `{"context":{"organization_guid":"o","space_guid":"sp"},"previous_values":{ "organization_id":"o","space_id":"sp"}}`},
		{name: "update creates previous_values", call: updateCall, brokerMax: v2_11,
			body: `{"service_id":"s","context":{"organization_guid":"o","space_guid":"sp"}}`,
			want: `{"service_id":"s","context":{"organization_guid":"o","space_guid":"sp"},"previous_values":{"organization_id":"o","space_id":"sp"}}`},
		{name: "update replaces null previous_values", call: updateCall, brokerMax: v2_11,
			body: `{"previous_values":null,"context":{"organization_guid":"o"}}`,
			want: `{"previous_values":{"organization_id":"o"},"context":{"organization_guid":"o"}}`},
		{name: "update with previous org and space is unchanged", call: updateCall, brokerMax: v2_11,
			body: `{"context":{"organization_guid":"o","space_guid":"sp"},"previous_values":{"organization_id":"o","space_id":"sp"}}`},
		{name: "update previous_values not an object is unchanged", call: updateCall, brokerMax: v2_11,
			body: `{"context":{"organization_guid":"o"},"previous_values":[]}`},
		{name: "bind adds app_guid", call: bindCall, brokerMax: v2_11,
			body: `{"service_id":"s","plan_id":"p","bind_resource":{"app_guid":"app-1"}}`,
			want: `{"service_id":"s","plan_id":"p","bind_resource":{"app_guid":"app-1"},"app_guid":"app-1"}`},
		{name: "bind keeps app_guid", call: bindCall, brokerMax: v2_11,
			body: `{"app_guid":"app-0","bind_resource":{"app_guid":"app-1"}}`},
		{name: "bind of a route is unchanged", call: bindCall, brokerMax: v2_11,
			body: `{"bind_resource":{"route":"www.example.com"}}`},
		{name: "bind reads the last of duplicate members", call: bindCall, brokerMax: v2_11,
			body: `{"bind_resource":{"app_guid":"app-1","app_guid":"app-2"}}`,
			want: `{"bind_resource":{"app_guid":"app-1","app_guid":"app-2"},"app_guid":"app-2"}`},
		{name: "deprovision is unchanged", call: Call{Endpoint: Deprovision}, brokerMax: v2_11, body: `{"context":{"organization_guid":"o"}}`},

		{name: "rotation drops predecessor_binding_id in the middle", call: bindCall, brokerMax: v2_15,
			body: `{"service_id":"s", "predecessor_binding_id": "b-0" ,"plan_id":"p"}`,
			want: `{"service_id":"s" ,"plan_id":"p"}`},
		{name: "rotation drops predecessor_binding_id at the end", call: bindCall, brokerMax: v2_15,
			body: "{\n  \"service_id\": \"s\",\n  \"predecessor_binding_id\": \"b-0\"\n}",
			want: "{\n  \"service_id\": \"s\"\n}"},
		{name: "rotation drops predecessor_binding_id first", call: bindCall, brokerMax: v2_15,
			body: `{ "predecessor_binding_id":"b-0", "service_id":"s"}`,
			want: `{ "service_id":"s"}`},
		{name: "rotation drops predecessor_binding_id alone", call: bindCall, brokerMax: v2_15,
			body: `{ "predecessor_binding_id":"b-0" }`,
			want: `{  }`},
		{name: "rotation drops every occurrence", call: bindCall, brokerMax: v2_15,
			body: `{"predecessor_binding_id":"b-0","predecessor_binding_id":"b-1","plan_id":"p","predecessor_binding_id":null}`,
			want: `{"plan_id":"p"}`},
		{name: "rotation drops a value of any type", call: bindCall, brokerMax: v2_15,
			body: `{"plan_id":"p","predecessor_binding_id":{"id":["b-0"]}}`,
			want: `{"plan_id":"p"}`},
		{name: "rotation to a 2.8 broker drops and copies", call: bindCall, brokerMax: osb.MustParseVersion("2.8"),
			body: `{"bind_resource":{"app_guid":"app-1"},"predecessor_binding_id":"b-0"}`,
			want: `{"bind_resource":{"app_guid":"app-1"},"app_guid":"app-1"}`},
		{name: "rotation to a 2.8 broker drops the only members before the copy", call: bindCall, brokerMax: osb.MustParseVersion("2.8"),
			body: `{"predecessor_binding_id":"b-0","bind_resource":{"app_guid":"app-1"},"predecessor_binding_id":"b-1"}`,
			want: `{"bind_resource":{"app_guid":"app-1"},"app_guid":"app-1"}`},
		{name: "rotation to a 2.17 broker is unchanged", call: bindCall, brokerMax: osb.MustParseVersion("2.17"),
			body: `{"plan_id":"p","predecessor_binding_id":"b-0"}`},
		{name: "predecessor_binding_id from a 2.16 platform is an extension field", call: bindCall,
			platform: osb.MustParseVersion("2.16"), brokerMax: v2_15, body: `{"plan_id":"p","predecessor_binding_id":"b-0"}`},
		{name: "predecessor_binding_id of a provision is left alone", call: provisionCall, brokerMax: v2_15,
			body: `{"plan_id":"p","predecessor_binding_id":"b-0"}`},
		{name: "bind without predecessor is unchanged", call: bindCall, brokerMax: v2_15, body: `{"plan_id":"p"}`},
		{name: "nested predecessor_binding_id is left alone", call: bindCall, brokerMax: v2_15,
			body: `{"parameters":{"predecessor_binding_id":"b-0"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			platform := tt.platform
			if platform.IsZero() {
				platform = v2_17
			}
			got, changed, err := Bridge(tt.call, []byte(tt.body), platform, tt.brokerMax)
			if err != nil {
				t.Fatalf("Bridge = %v", err)
			}
			want := tt.want
			if want == "" {
				want = tt.body
			}
			if changed != (tt.want != "") {
				t.Errorf("Bridge changed = %v, want %v", changed, tt.want != "")
			}
			if diff := cmp.Diff(want, string(got)); diff != "" {
				t.Errorf("Bridge body mismatch (-want +got):\n%s", diff)
			}
			if !json.Valid(got) {
				t.Errorf("Bridge returned invalid JSON: %s", got)
			}
		})
	}
}

func TestBridgeKeepsBytes(t *testing.T) {
	body := []byte(`{"service_id":"s"}`)
	got, changed, err := Bridge(provisionCall, body, v2_17, osb.MustParseVersion("2.11"))
	if err != nil || changed || &got[0] != &body[0] {
		t.Errorf("Bridge(no context) = %q, %v, %v; want the same slice, false, nil", got, changed, err)
	}
}

func TestBridgeRefusesNonObjects(t *testing.T) {
	for _, body := range []string{``, `[]`, `{"a":`, `null`, `{"a":1} x`} {
		got, changed, err := Bridge(provisionCall, []byte(body), v2_17, osb.MustParseVersion("2.11"))
		var oe *osb.Error
		if !errors.As(err, &oe) || oe.Status != 400 {
			t.Errorf("Bridge(%q) error = %v, want a 400 *osb.Error", body, err)
		}
		if changed || string(got) != body {
			t.Errorf("Bridge(%q) = %q, %v; want the body unchanged", body, got, changed)
		}
	}
}
