package rules

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

func TestAsyncRequired(t *testing.T) {
	asyncRequired := Answer{Status: 422, Object: true, Code: osb.CodeAsyncRequired}
	bindSync := Call{Endpoint: Bind, InstanceID: "i-1", BindingID: "b-1"}
	for _, tc := range []struct {
		name string
		c    Call
		a    Answer
		want bool
	}{
		{"provision without the flag", provisionSync, asyncRequired, true},
		{"update without the flag", updateSync, asyncRequired, true},
		{"deprovision without the flag", deprovisionSync, asyncRequired, true},
		{"bind without the flag", bindSync, asyncRequired, true},
		{"unbind without the flag", unbindSync, asyncRequired, true},
		{"the platform sent the flag", deprovisionAsync, asyncRequired, false},
		{"another 422", provisionSync, Answer{Status: 422, Object: true, Code: osb.CodeConcurrencyError}, false},
		{"422 without a code", provisionSync, Answer{Status: 422, Object: true}, false},
		{"AsyncRequired with another status", provisionSync, Answer{Status: 400, Object: true, Code: osb.CodeAsyncRequired}, false},
		{"no mutating call", getInstanceCall, asyncRequired, false},
	} {
		if got := AsyncRequired(tc.c, tc.a); got != tc.want {
			t.Errorf("%s: AsyncRequired = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSyncBody(t *testing.T) {
	provision, _ := SyncWaitOf(provisionSync)
	deprovision, _ := SyncWaitOf(deprovisionSync)
	bind, _ := SyncWaitOf(Call{Endpoint: Bind})
	for _, tc := range []struct {
		name string
		w    SyncWait
		from string
		want string
	}{
		{"provision keeps the dashboard", provision, `{"dashboard_url":"https://d.example/1","operation":"op-1"}`, `{"dashboard_url":"https://d.example/1"}`},
		{"operation in any case", provision, ` {"Operation":"a", "dashboard_url" : "https://d.example/1", "OPERATION":"b"} `, `{"dashboard_url":"https://d.example/1"}`},
		{"nothing but the operation", provision, `{"operation":"op-1"}`, `{}`},
		{"no body", provision, ``, `{}`},
		{"no object", provision, `["op-1"]`, `{}`},
		{"deprovision answers {}", deprovision, `{"operation":"op-1","extra":1}`, `{}`},
		{"bind keeps the credentials, not the parameters", bind,
			`{"credentials":{"password":"p"},"parameters":{"size":1},"syslog_drain_url":"syslog://x"}`,
			`{"credentials":{"password":"p"},"syslog_drain_url":"syslog://x"}`},
	} {
		if diff := cmp.Diff(tc.want, string(SyncBody(tc.w, []byte(tc.from)))); diff != "" {
			t.Errorf("%s: SyncBody (-want +got):\n%s", tc.name, diff)
		}
	}
}

// TestSyncAnswersValid: the answers the gateway synthesizes for a
// platform that cannot wait validate against the response rules of every
// version the endpoint exists at.
func TestSyncAnswersValid(t *testing.T) {
	bindSync := Call{Endpoint: Bind, InstanceID: "i-1", BindingID: "b-1"}
	for _, tc := range []struct {
		c    Call
		from string
	}{
		{provisionSync, `{"dashboard_url":"https://d.example/1","operation":"op-1"}`},
		{updateSync, `{"dashboard_url":"https://d.example/1","operation":"op-1"}`},
		{deprovisionSync, `{"operation":"op-1"}`},
		{bindSync, `{"credentials":{"password":"p"},"parameters":{"size":1}}`},
		{unbindSync, `{}`},
	} {
		w, ok := SyncWaitOf(tc.c)
		if !ok {
			t.Fatalf("%s: no SyncWait", tc.c.Endpoint)
		}
		for _, v := range []osb.Version{{Major: 2, Minor: 14}, {Major: 2, Minor: 15}, {Major: 2, Minor: 17}} {
			if _, vs := CheckResponse(tc.c, v, w.Success, SyncBody(w, []byte(tc.from)), nil, ResponseOptions{}); len(vs) != 0 {
				t.Errorf("%s at %s: success answer breaks %v", tc.c.Endpoint, v, vs)
			}
			failed := `{"description":"the broker's operation failed: disk full"}`
			if _, vs := CheckResponse(tc.c, v, SyncFailed, []byte(failed), nil, ResponseOptions{}); len(vs) != 0 {
				t.Errorf("%s at %s: failure answer breaks %v", tc.c.Endpoint, v, vs)
			}
		}
		if ok, _ := OrphanCandidate(tc.c, Answer{Status: SyncFailed, Object: true}); ok {
			t.Errorf("%s: a failed operation answered %d would be mitigated", tc.c.Endpoint, SyncFailed)
		}
		if tc.c.Endpoint == Provision || tc.c.Endpoint == Bind {
			if w.Success != http.StatusCreated {
				t.Errorf("%s: success %d, want 201", tc.c.Endpoint, w.Success)
			}
		}
	}
}
