package routes

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// TestRetiredRefusal: what a retired broker no longer takes, per endpoint
// and answer, and that every refusal is a 422 naming the broker.
func TestRetiredRefusal(t *testing.T) {
	forward := config.Retired{On: true}
	gone := config.Retired{On: true, Answer: config.RetiredGone}
	tests := []struct {
		name    string
		retired config.Retired
		ep      rules.Endpoint
		want    string // a part of the description; empty: not refused
	}{
		{"not retired: provision", config.Retired{}, rules.Provision, ""},
		{"provision", forward, rules.Provision, "takes no new request to create service instances"},
		{"bind", forward, rules.Bind, "takes no new request to create service bindings"},
		{"update forwarded", forward, rules.Update, ""},
		{"unbind forwarded", forward, rules.Unbind, ""},
		{"deprovision forwarded", forward, rules.Deprovision, ""},
		{"fetch forwarded", forward, rules.GetInstance, ""},
		{"catalog served", gone, rules.Catalog, ""},
		{"gone: provision", gone, rules.Provision, "takes no new request to create service instances"},
		{"gone: update", gone, rules.Update, "retired and gone: an update"},
		{"gone: deprovision left to the gone stage", gone, rules.Deprovision, ""},
		{"gone: poll forwarded", gone, rules.InstanceLastOperation, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &upstream.Upstream{Name: "mysql", Cfg: config.Broker{Name: "mysql", Retired: tt.retired}}
			err := retiredRefusal(u, rules.Call{Endpoint: tt.ep, InstanceID: "i"})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *osb.Error
			if !errors.As(err, &e) || e.Status != http.StatusUnprocessableEntity || !strings.Contains(e.Description, tt.want) ||
				!strings.Contains(e.Description, `broker "mysql" is retired`) {
				t.Errorf("refusal %#v, want 422 naming the broker and saying %q", err, tt.want)
			}
		})
	}
}
