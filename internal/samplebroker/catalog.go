package samplebroker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
)

// Catalog identifiers. They are fixed so that platforms, gateway configs and
// tests can name them.
const (
	// ServiceID is the bindable service "sample", with plans "sync" and "async".
	ServiceID = "5a3e1f0c-8b2d-4c6e-9f71-0d2b3c4a5e01"
	// PlanSyncID is the plan "sync" of ServiceID: every operation completes
	// in the request.
	PlanSyncID = "5a3e1f0c-8b2d-4c6e-9f71-0d2b3c4a5e02"
	// PlanAsyncID is the plan "async" of ServiceID: provision, update and
	// deprovision require accepts_incomplete=true and complete after
	// Options.AsyncDelay; binds and unbinds are asynchronous when the platform
	// accepts it (OSB 2.14 and later).
	PlanAsyncID = "5a3e1f0c-8b2d-4c6e-9f71-0d2b3c4a5e03"
	// NoBindServiceID is the service "sample-nobind", which cannot be bound.
	NoBindServiceID = "5a3e1f0c-8b2d-4c6e-9f71-0d2b3c4a5e04"
	// NoBindPlanID is the plan "standard" of NoBindServiceID, synchronous.
	NoBindPlanID = "5a3e1f0c-8b2d-4c6e-9f71-0d2b3c4a5e05"
)

// Catalog names and values, as they appear in the catalog.
const (
	ServiceName       = "sample"        // name of ServiceID
	PlanSyncName      = "sync"          // name of PlanSyncID
	PlanAsyncName     = "async"         // name of PlanAsyncID
	NoBindServiceName = "sample-nobind" // name of NoBindServiceID
	NoBindPlanName    = "standard"      // name of NoBindPlanID

	// MaintenanceVersion is the maintenance_info.version of the sync plan.
	MaintenanceVersion = "1.0.0"
	// MaxPollingDuration is the async plan's maximum_polling_duration, in
	// seconds.
	MaxPollingDuration = 600
)

// sizes are the values the sync plan's "size" parameter accepts; its JSON
// Schema lists the same.
var sizes = []string{"small", "medium", "large"}

// planDef is what the broker's logic needs to know about a plan.
type planDef struct {
	id, name   string
	service    *serviceDef
	async      bool   // provision, update, deprovision only with accepts_incomplete
	maint      string // maintenance_info.version, "" when none
	sizeSchema bool   // parameters are checked against the size schema
}

// serviceDef is what the broker's logic needs to know about a service.
type serviceDef struct {
	id, name   string
	bindable   bool
	updateable bool // plan_updateable
}

// catalogDefs is the broker's catalog as its logic sees it.
type catalogDefs struct {
	services map[string]*serviceDef
	plans    map[string]*planDef
}

// newCatalogDefs builds the lookup tables for the fixed catalog.
func newCatalogDefs() catalogDefs {
	sample := &serviceDef{id: ServiceID, name: ServiceName, bindable: true, updateable: true}
	nobind := &serviceDef{id: NoBindServiceID, name: NoBindServiceName}
	plans := []*planDef{
		{id: PlanSyncID, name: PlanSyncName, service: sample, maint: MaintenanceVersion, sizeSchema: true},
		{id: PlanAsyncID, name: PlanAsyncName, service: sample, async: true},
		{id: NoBindPlanID, name: NoBindPlanName, service: nobind},
	}
	d := catalogDefs{
		services: map[string]*serviceDef{ServiceID: sample, NoBindServiceID: nobind},
		plans:    make(map[string]*planDef, len(plans)),
	}
	for _, p := range plans {
		d.plans[p.id] = p
	}
	return d
}

// Wire shapes of the catalog. Fields newer than OSB 2.8 are left empty in
// legacy mode and disappear through omitempty.
type (
	catalogJSON struct {
		Services []serviceJSON `json:"services"`
	}
	serviceJSON struct {
		ID                   string         `json:"id"`
		Name                 string         `json:"name"`
		Description          string         `json:"description"`
		Bindable             bool           `json:"bindable"`
		InstancesRetrievable bool           `json:"instances_retrievable,omitempty"`
		BindingsRetrievable  bool           `json:"bindings_retrievable,omitempty"`
		PlanUpdateable       bool           `json:"plan_updateable,omitempty"`
		Tags                 []string       `json:"tags,omitempty"`
		Metadata             map[string]any `json:"metadata,omitempty"`
		Plans                []planJSON     `json:"plans"`
	}
	planJSON struct {
		ID                     string           `json:"id"`
		Name                   string           `json:"name"`
		Description            string           `json:"description"`
		Free                   bool             `json:"free"`
		Bindable               *bool            `json:"bindable,omitempty"`
		Metadata               map[string]any   `json:"metadata,omitempty"`
		Schemas                *schemasJSON     `json:"schemas,omitempty"`
		MaximumPollingDuration int              `json:"maximum_polling_duration,omitempty"`
		MaintenanceInfo        *maintenanceJSON `json:"maintenance_info,omitempty"`
	}
	schemasJSON struct {
		ServiceInstance struct {
			Create parametersJSON `json:"create"`
			Update parametersJSON `json:"update"`
		} `json:"service_instance"`
	}
	parametersJSON struct {
		Parameters map[string]any `json:"parameters"`
	}
	maintenanceJSON struct {
		Version     string `json:"version"`
		Description string `json:"description,omitempty"`
	}
)

// sizeSchema is the JSON Schema of the sync plan's parameters.
func sizeSchema() map[string]any {
	return map[string]any{
		"$schema": "http://json-schema.org/draft-04/schema#",
		"type":    "object",
		"properties": map[string]any{
			"size": map[string]any{
				"description": "How much capacity the instance pretends to have.",
				"type":        "string",
				"enum":        sizes,
			},
		},
	}
}

// catalogDocument returns the catalog as sent on the wire. legacy leaves out
// everything newer than OSB 2.8; retrievable sets instances_retrievable and
// bindings_retrievable where the service has them (never in legacy mode).
func catalogDocument(legacy, retrievable bool) catalogJSON {
	yes := true
	sync := planJSON{
		ID: PlanSyncID, Name: PlanSyncName, Free: true,
		Description: "Every operation completes within the request.",
		Metadata:    map[string]any{"displayName": "Synchronous", "bullets": []string{"in-memory", "instant"}},
	}
	async := planJSON{
		ID: PlanAsyncID, Name: PlanAsyncName, Free: true,
		Description: "Provision, update and deprovision are asynchronous; so are binds when the platform accepts it.",
		Metadata:    map[string]any{"displayName": "Asynchronous", "bullets": []string{"in-memory", "takes a while"}},
	}
	standard := planJSON{
		ID: NoBindPlanID, Name: NoBindPlanName, Free: true,
		Description: "A synchronous plan of a service that cannot be bound.",
	}
	if !legacy {
		sync.Bindable, async.Bindable = &yes, &yes
		sync.Schemas = &schemasJSON{}
		sync.Schemas.ServiceInstance.Create.Parameters = sizeSchema()
		sync.Schemas.ServiceInstance.Update.Parameters = sizeSchema()
		sync.MaintenanceInfo = &maintenanceJSON{Version: MaintenanceVersion, Description: "Initial release."}
		async.MaximumPollingDuration = MaxPollingDuration
	}
	sample := serviceJSON{
		ID: ServiceID, Name: ServiceName, Bindable: true, PlanUpdateable: true,
		Description: "An in-memory sample service for demos and tests.",
		Tags:        []string{"sample", "in-memory"},
		Metadata:    map[string]any{"displayName": "Sample", "providerDisplayName": "osb-gateway"},
		Plans:       []planJSON{sync, async},
	}
	nobind := serviceJSON{
		ID: NoBindServiceID, Name: NoBindServiceName,
		Description: "An in-memory sample service without bindings.",
		Tags:        []string{"sample", "in-memory"},
		Plans:       []planJSON{standard},
	}
	if !legacy && retrievable {
		sample.InstancesRetrievable, sample.BindingsRetrievable = true, true
		nobind.InstancesRetrievable = true
	}
	return catalogJSON{Services: []serviceJSON{sample, nobind}}
}

// catalogResponse is the precomputed GET /v2/catalog answer.
type catalogResponse struct {
	body   []byte
	length []string // Content-Length
	etag   []string // ETag; nil in legacy mode
}

// newCatalogResponse marshals the catalog once (see catalogDocument).
func newCatalogResponse(legacy, retrievable bool) catalogResponse {
	body, err := json.Marshal(catalogDocument(legacy, retrievable))
	if err != nil {
		panic("samplebroker: catalog does not marshal: " + err.Error())
	}
	body = append(body, '\n')
	c := catalogResponse{body: body, length: []string{strconv.Itoa(len(body))}}
	if !legacy {
		sum := sha256.Sum256(body)
		c.etag = []string{`"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return c
}

// serveCatalog writes the precomputed catalog, or 304 when the platform
// already holds this version (If-None-Match, OSB 2.16).
func (b *Broker) serveCatalog(w http.ResponseWriter, r *http.Request) {
	h, c := w.Header(), b.catalog.Load()
	if c.etag != nil {
		h["Etag"] = c.etag
		if inm := r.Header["If-None-Match"]; len(inm) > 0 && inm[0] == c.etag[0] {
			w.WriteHeader(http.StatusNotModified)
			return
		}
	}
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = c.length
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(c.body)
}

// Catalog returns a copy of the catalog document GET /v2/catalog answers
// with, byte for byte.
func (b *Broker) Catalog() []byte {
	return append([]byte(nil), b.catalog.Load().body...)
}
