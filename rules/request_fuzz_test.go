package rules

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// fuzzCall builds the call and version a fuzz input stands for.
func fuzzCall(endpoint, minor uint8, async bool) (Call, osb.Version) {
	c := Call{Endpoint: Endpoint(endpoint % uint8(len(endpoints))), InstanceID: "i", AcceptsIncomplete: async}
	if endpoint&0x80 != 0 {
		c.ServiceID, c.PlanID = "s-mysql", "p-small"
	}
	return c, osb.Version{Major: 2, Minor: int(minor % 20)}
}

// addRequestSeeds adds the bodies of the request tables to the corpus.
func addRequestSeeds(f *testing.F) {
	for _, tt := range allRequestCases() {
		f.Add([]byte(tt.body), uint8(tt.call.Endpoint), uint8(osb.MustParseVersion(tt.version).Minor), tt.catalog)
	}
	f.Add([]byte(`{"a":1,"a":2,"\u0061":3}`), uint8(Provision), uint8(15), false)
	f.Add([]byte("{\"service_id\":\"\xff\",\"context\":{\"x\":\"<&>\"}}"), uint8(Update), uint8(15), true)
}

// rawJSON compares raw JSON values by what they decode to.
var rawJSON = cmp.Transformer("rawJSON", func(r json.RawMessage) any {
	dec := json.NewDecoder(bytes.NewReader(r))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(r)
	}
	return v
})

// FuzzCheckRequest checks that CheckRequest never panics, that every
// violation is well-formed, and that whatever decodes re-encodes: the
// members of a decoded Request, encoded again, decode to the same Request
// and break the same rules (but for duplicate members, which encoding
// drops).
func FuzzCheckRequest(f *testing.F) {
	addRequestSeeds(f)
	f.Fuzz(func(t *testing.T, body []byte, endpoint, minor uint8, withCatalog bool) {
		c, v := fuzzCall(endpoint, minor, false)
		var cat CatalogView
		if withCatalog {
			cat = testCatalog()
		}
		req, vs := CheckRequest(c, v, body, cat)
		for _, x := range vs {
			if x.Rule == "" || x.Description == "" || (x.Status != 400 && x.Status != 422) {
				t.Fatalf("malformed violation %+v", x)
			}
		}
		if req == nil {
			return
		}
		again, err := json.Marshal(req.Fields)
		if err != nil {
			t.Fatalf("json.Marshal(Request.Fields) = %v", err)
		}
		req2, vs2 := CheckRequest(c, v, again, cat)
		if req2 == nil {
			t.Fatalf("re-encoded body %s does not decode: %v", again, vs2)
		}
		if diff := cmp.Diff(req, req2, rawJSON, cmpopts.IgnoreFields(Request{}, "Fields")); diff != "" {
			t.Errorf("re-encoded Request differs (-first +again):\n%s", diff)
		}
		first := slices.DeleteFunc(ruleIDs(vs), func(r string) bool { return r == "request.body.duplicate_field" })
		if diff := cmp.Diff(first, ruleIDs(vs2), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("re-encoded body breaks other rules (-first +again):\n%s", diff)
		}
	})
}

// FuzzBridge checks that Bridge never panics, never loses or changes a
// member but those the predated table drops, adds only strings (and the
// previous_values object), and is idempotent. The bool input has the
// platform speak 2.17 rather than the broker's version.
func FuzzBridge(f *testing.F) {
	addRequestSeeds(f)
	f.Add([]byte(`{"context":{"organization_guid":"o","space_guid":"s"},"previous_values":null}`), uint8(Update), uint8(11), false)
	f.Add([]byte(`{"bind_resource":{"app_guid":"a"},"app_guid":null}`), uint8(Bind), uint8(8), false)
	f.Add([]byte(`{"context":{"space_guid":"0"},"":null}`), uint8(Provision), uint8(11), false)
	f.Add([]byte(`{"predecessor_binding_id":"b","bind_resource":{"app_guid":"a"},"predecessor_binding_id":1}`), uint8(Bind), uint8(8), true)
	f.Add([]byte(`{ "predecessor_binding_id" : "b" }`), uint8(Bind), uint8(15), true)
	f.Fuzz(func(t *testing.T, body []byte, endpoint, minor uint8, modern bool) {
		c, v := fuzzCall(endpoint, minor, false)
		platform := v
		if modern {
			platform = v2_17
		}
		dropped := ForwardingFor(c, platform, v).bodyDrops()
		got, changed, err := Bridge(c, body, platform, v)
		if err != nil || !changed {
			if changed || !bytes.Equal(got, body) {
				t.Fatalf("Bridge = %q, %v, %v; want the body unchanged", got, changed, err)
			}
			return
		}
		var before, after map[string]json.RawMessage
		if err := json.Unmarshal(body, &before); err != nil {
			t.Fatalf("Bridge changed a body that does not decode: %v", err)
		}
		if err := json.Unmarshal(got, &after); err != nil {
			t.Fatalf("Bridge returned invalid JSON %q: %v", got, err)
		}
		for k, raw := range before {
			if slices.Contains(dropped, k) {
				if _, ok := after[k]; ok {
					t.Errorf("member %q is still there: %s", k, got)
				}
				continue
			}
			if isNull(raw) || k == "previous_values" {
				continue
			}
			if diff := cmp.Diff(raw, after[k], rawJSON); diff != "" {
				t.Errorf("member %q changed (-before +after):\n%s", k, diff)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(after)) {
			if raw, ok := before[k]; ok && cmp.Equal(raw, after[k], rawJSON) {
				continue
			}
			if typ := typeOf(after[k]); typ != typeString && !(k == "previous_values" && typ == typeObject) {
				t.Errorf("Bridge added %q = %s", k, after[k])
			}
		}
		if again, changed, _ := Bridge(c, got, platform, v); changed {
			t.Errorf("Bridge is not idempotent: %q becomes %q", got, again)
		}
	})
}

// FuzzCheckResponse checks that CheckResponse never panics, that every
// violation is well-formed, and that it reads the answer as ReadResponse
// does.
func FuzzCheckResponse(f *testing.F) {
	for _, tt := range append(append([]responseCase(nil), responseStatusCases...), responseBodyCases...) {
		f.Add([]byte(tt.body), uint8(tt.call.Endpoint), uint8(osb.MustParseVersion(tt.version).Minor),
			uint16(tt.status), tt.call.AcceptsIncomplete, uint8(tt.opts.Polled))
	}
	f.Fuzz(func(t *testing.T, body []byte, endpoint, minor uint8, status uint16, async bool, polled uint8) {
		c, v := fuzzCall(endpoint, minor, async)
		opts := ResponseOptions{Polled: Endpoint(polled % uint8(len(endpoints))), Request: &Request{ServiceID: "s-route"}}
		a, vs := CheckResponse(c, v, int(status), body, testCatalog(), opts)
		for _, x := range vs {
			if x.Rule == "" || x.Description == "" || x.Status != 502 {
				t.Fatalf("malformed violation %+v", x)
			}
		}
		if read := ReadResponse(c, int(status), body); a != read {
			t.Fatalf("CheckResponse read %+v, ReadResponse %+v", a, read)
		}
	})
}
