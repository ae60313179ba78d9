package samplebroker

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// catalogShape is the part of the catalog the tests hold against the spec.
type catalogShape struct {
	Services []struct {
		ID                   string `json:"id"`
		Name                 string `json:"name"`
		Bindable             bool   `json:"bindable"`
		InstancesRetrievable *bool  `json:"instances_retrievable"`
		BindingsRetrievable  *bool  `json:"bindings_retrievable"`
		PlanUpdateable       *bool  `json:"plan_updateable"`
		Plans                []struct {
			ID                     string          `json:"id"`
			Name                   string          `json:"name"`
			Bindable               *bool           `json:"bindable"`
			Schemas                json.RawMessage `json:"schemas"`
			MaximumPollingDuration *int            `json:"maximum_polling_duration"`
			MaintenanceInfo        *struct {
				Version string `json:"version"`
			} `json:"maintenance_info"`
		} `json:"plans"`
	} `json:"services"`
}

// summary flattens the catalog into one line per service and plan naming the
// optional fields present.
func (c catalogShape) summary() []string {
	var out []string
	for _, s := range c.Services {
		line := s.Name + " " + s.ID
		if s.Bindable {
			line += " bindable"
		}
		if s.InstancesRetrievable != nil {
			line += " instances_retrievable"
		}
		if s.BindingsRetrievable != nil {
			line += " bindings_retrievable"
		}
		if s.PlanUpdateable != nil {
			line += " plan_updateable"
		}
		out = append(out, line)
		for _, p := range s.Plans {
			line := "  " + p.Name + " " + p.ID
			if p.Bindable != nil {
				line += " bindable"
			}
			if p.Schemas != nil {
				line += " schemas"
			}
			if p.MaximumPollingDuration != nil {
				line += " maximum_polling_duration"
			}
			if p.MaintenanceInfo != nil {
				line += " maintenance_info=" + p.MaintenanceInfo.Version
			}
			out = append(out, line)
		}
	}
	return out
}

func TestCatalog(t *testing.T) {
	tests := []struct {
		name   string
		legacy bool
		want   []string
	}{
		{name: "2.17", want: []string{
			"sample " + ServiceID + " bindable instances_retrievable bindings_retrievable plan_updateable",
			"  sync " + PlanSyncID + " bindable schemas maintenance_info=1.0.0",
			"  async " + PlanAsyncID + " bindable maximum_polling_duration",
			"sample-nobind " + NoBindServiceID + " instances_retrievable",
			"  standard " + NoBindPlanID,
		}},
		{name: "legacy", legacy: true, want: []string{
			"sample " + ServiceID + " bindable plan_updateable",
			"  sync " + PlanSyncID,
			"  async " + PlanAsyncID,
			"sample-nobind " + NoBindServiceID,
			"  standard " + NoBindPlanID,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{Legacy: tt.legacy})
			r := f.must(req{method: "GET", path: "/v2/catalog", version: "2.8"}, http.StatusOK)
			if !bytes.Equal(r.body, f.b.Catalog()) {
				t.Errorf("GET /v2/catalog differs from Catalog()")
			}
			var c catalogShape
			if err := json.Unmarshal(r.body, &c); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.summary()); diff != "" {
				t.Errorf("catalog (-want +got)\n%s", diff)
			}
			if got, want := r.header.Get("Content-Length"), len(r.body); got == "" {
				t.Errorf("no Content-Length, want %d", want)
			}
		})
	}
}

func TestCatalogSchema(t *testing.T) {
	var doc struct {
		Services []struct {
			Plans []struct {
				Name    string `json:"name"`
				Schemas struct {
					ServiceInstance struct {
						Create struct {
							Parameters map[string]any `json:"parameters"`
						} `json:"create"`
					} `json:"service_instance"`
				} `json:"schemas"`
			} `json:"plans"`
		} `json:"services"`
	}
	if err := json.Unmarshal(New(Options{}).Catalog(), &doc); err != nil {
		t.Fatal(err)
	}
	schema := doc.Services[0].Plans[0].Schemas.ServiceInstance.Create.Parameters
	if s, _ := schema["$schema"].(string); !strings.Contains(s, "json-schema.org/draft-04") {
		t.Errorf("$schema %q, want draft-04", s)
	}
	if schema["type"] != "object" {
		t.Errorf("type %v, want object", schema["type"])
	}
}

func TestCatalogETag(t *testing.T) {
	f := newFixture(t, Options{})
	r := f.must(req{method: "GET", path: "/v2/catalog"}, http.StatusOK)
	etag := r.header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	f.must(req{method: "GET", path: "/v2/catalog", header: map[string]string{"If-None-Match": etag}}, http.StatusNotModified)
	f.must(req{method: "GET", path: "/v2/catalog", header: map[string]string{"If-None-Match": `"other"`}}, http.StatusOK)

	legacy := newFixture(t, Options{Legacy: true})
	if got := legacy.must(req{method: "GET", path: "/v2/catalog"}, http.StatusOK).header.Get("ETag"); got != "" {
		t.Errorf("legacy ETag %q, want none", got)
	}
}
