package rules

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

func TestClassifyIDs(t *testing.T) {
	long := strings.Repeat("a", MaxIDLength)
	tests := []struct {
		name, method, path string
		want               Call
		wantErr            string // 400 description; empty for success
	}{
		{name: "guid", method: "PUT", path: "/v2/service_instances/6a7b3c2e-1f0d-4e5a-9b8c-7d6e5f4a3b2c",
			want: Call{Endpoint: Provision, InstanceID: "6a7b3c2e-1f0d-4e5a-9b8c-7d6e5f4a3b2c"}},
		{name: "escaped space and unicode", method: "GET", path: "/v2/service_instances/a%20b%C3%A9/last_operation",
			want: Call{Endpoint: InstanceLastOperation, InstanceID: "a bé"}},
		{name: "plus stays plus", method: "GET", path: "/v2/service_instances/a+b",
			want: Call{Endpoint: GetInstance, InstanceID: "a+b"}},
		{name: "escaped dot within id", method: "DELETE", path: "/v2/service_instances/a%2Eb",
			want: Call{Endpoint: Deprovision, InstanceID: "a.b"}},
		{name: "three dots", method: "DELETE", path: "/v2/service_instances/...",
			want: Call{Endpoint: Deprovision, InstanceID: "..."}},
		{name: "id at the length limit", method: "PUT", path: "/v2/service_instances/" + long,
			want: Call{Endpoint: Provision, InstanceID: long}},
		{name: "escaped binding id", method: "PUT", path: instPath + "/service_bindings/b%3Ac",
			want: Call{Endpoint: Bind, InstanceID: "inst-1", BindingID: "b:c"}},

		{name: "escaped slash", method: "PUT", path: "/v2/service_instances/a%2Fb",
			wantErr: `instance id "a/b" contains "/"`},
		{name: "escaped slash lower case", method: "PUT", path: "/v2/service_instances/a%2fb",
			wantErr: `instance id "a/b" contains "/"`},
		{name: "escaped dot dot", method: "GET", path: "/v2/service_instances/%2e%2e",
			wantErr: `instance id ".." is a dot segment`},
		{name: "dot dot", method: "GET", path: "/v2/service_instances/../last_operation",
			wantErr: `instance id ".." is a dot segment`},
		{name: "dot", method: "PUT", path: "/v2/service_instances/.",
			wantErr: `instance id "." is a dot segment`},
		{name: "binding dot dot", method: "PUT", path: instPath + "/service_bindings/%2E%2E",
			wantErr: `binding id ".." is a dot segment`},
		{name: "empty instance id", method: "PUT", path: "/v2/service_instances/",
			wantErr: "instance id is empty"},
		{name: "empty segment", method: "PUT", path: "/v2/service_instances//service_bindings/b",
			wantErr: "instance id is empty"},
		{name: "empty instance id before last_operation", method: "GET", path: "/v2/service_instances//last_operation",
			wantErr: "instance id is empty"},
		{name: "empty binding id", method: "PUT", path: instPath + "/service_bindings/",
			wantErr: "binding id is empty"},
		{name: "empty binding id before last_operation", method: "GET", path: instPath + "/service_bindings//last_operation",
			wantErr: "binding id is empty"},
		{name: "nul", method: "PUT", path: "/v2/service_instances/a%00",
			wantErr: `instance id "a\x00" contains a control character`},
		{name: "newline", method: "PUT", path: "/v2/service_instances/a%0Ab",
			wantErr: `instance id "a\nb" contains a control character`},
		{name: "del", method: "PUT", path: "/v2/service_instances/a%7F",
			wantErr: `instance id "a\x7f" contains a control character`},
		{name: "c1 control", method: "PUT", path: "/v2/service_instances/a%C2%85",
			wantErr: `instance id "a\u0085" contains a control character`},
		{name: "raw tab", method: "PUT", path: "/v2/service_instances/a\tb",
			wantErr: `instance id "a\tb" contains a control character`},
		{name: "invalid utf-8", method: "PUT", path: "/v2/service_instances/a%FF",
			wantErr: `instance id "a\xff" is not valid UTF-8`},
		{name: "bad escape", method: "PUT", path: "/v2/service_instances/a%zz",
			wantErr: `instance id "a%zz" is not validly percent-encoded`},
		{name: "truncated escape", method: "PUT", path: instPath + "/service_bindings/b%4",
			wantErr: `binding id "b%4" is not validly percent-encoded`},
		{name: "too long", method: "PUT", path: "/v2/service_instances/" + long + "b",
			wantErr: "instance id is 256 bytes long; the limit is 255"},
		{name: "too long escaped", method: "PUT", path: "/v2/service_instances/" + strings.Repeat("%41", MaxIDLength+1),
			wantErr: "instance id is longer than 255 bytes"},
		{name: "too long binding", method: "DELETE", path: instPath + "/service_bindings/" + long + "bb",
			wantErr: "binding id is 257 bytes long; the limit is 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := classify(t, tt.method, tt.path, "")
			if tt.wantErr != "" {
				want := &osb.Error{Status: http.StatusBadRequest, Description: tt.wantErr}
				if diff := cmp.Diff(want, err); diff != "" {
					t.Errorf("Classify(%q) error mismatch (-want +got):\n%s", tt.path, diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Classify(%q) = %v", tt.path, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Classify(%q) mismatch (-want +got):\n%s", tt.path, diff)
			}
		})
	}
}

// validID is the id rule restated independently of checkID, as the fuzz
// oracle.
func validID(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > MaxIDLength || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if r == '/' || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

func FuzzClassify(f *testing.F) {
	seeds := []struct{ method, path, query, id string }{
		{"GET", "/v2/catalog", "", "inst-1"},
		{"PUT", instPath, "accepts_incomplete=true", "a/b"},
		{"PATCH", instPath, "accepts_incomplete=false&service_id=s&plan_id=p", ".."},
		{"DELETE", bindPath, "service_id=s&plan_id=p", ""},
		{"GET", bindPath + "/last_operation", "operation=a%2Fb+c", "é"},
		{"GET", "/v2/service_instances/%2e%2e/last_operation", "", "\x00"},
		{"HEAD", "/v2/service_instances//service_bindings/", "x=%zz;y", strings.Repeat("x", 300)},
		{"POST", "/v2/foo", "accepts_incomplete=maybe", "%"},
		{"GET", "/v2/service_instances/a%FF", "plan_id=1&plan_id=2", "\xff"},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, s.id)
	}
	f.Fuzz(func(t *testing.T, method, path, query, id string) {
		c, err := Classify(method, path, query)
		if err != nil {
			var oe *osb.Error
			if !errors.As(err, &oe) {
				t.Fatalf("Classify(%q, %q, %q) error %v is %T, not *osb.Error", method, path, query, err, err)
			}
			switch oe.Status {
			case http.StatusBadRequest, http.StatusNotFound:
			case http.StatusMethodNotAllowed:
				if oe.Header.Get("Allow") == "" {
					t.Errorf("Classify(%q, %q, %q): 405 without Allow", method, path, query)
				}
			default:
				t.Errorf("Classify(%q, %q, %q) status %d, want 400, 404 or 405", method, path, query, oe.Status)
			}
			if oe.Description == "" {
				t.Errorf("Classify(%q, %q, %q): error without description", method, path, query)
			}
		} else {
			if c.Endpoint == Unknown {
				t.Errorf("Classify(%q, %q, %q) succeeded with Unknown", method, path, query)
			}
			if c.Endpoint.info().method != method {
				t.Errorf("Classify(%q, %q, %q) = %v, whose method is %s", method, path, query, c.Endpoint, c.Endpoint.info().method)
			}
			if c.Endpoint.Instance() != validID(c.InstanceID) || c.Endpoint.Binding() != validID(c.BindingID) {
				t.Errorf("Classify(%q, %q, %q) = %+v: ids do not fit the endpoint", method, path, query, c)
			}
		}

		// Round trip: an escaped id comes back as it went in, or is refused
		// with 400 exactly when it is invalid.
		for _, p := range []struct {
			path string
			get  func(Call) string
		}{
			{"/v2/service_instances/" + url.PathEscape(id), func(c Call) string { return c.InstanceID }},
			{bindPath[:len(bindPath)-len("bind-1")] + url.PathEscape(id), func(c Call) string { return c.BindingID }},
		} {
			c, err := classify(t, "GET", p.path, "")
			switch {
			case !validID(id):
				if err == nil || err.Status != http.StatusBadRequest {
					t.Errorf("Classify(GET, %q) = %+v, %v; want 400 for id %q", p.path, c, err, id)
				}
			case err != nil:
				t.Errorf("Classify(GET, %q) = %v; want id %q", p.path, err, id)
			case p.get(c) != id:
				t.Errorf("Classify(GET, %q) id = %q, want %q", p.path, p.get(c), id)
			}
		}
	})
}
