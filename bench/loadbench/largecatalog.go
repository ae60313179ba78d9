// This file generates catalog-1mb's catalog: a marketplace of database-like
// services with plans that carry what real catalogs carry — metadata with
// costs and bullets, parameter schemas for provision, update and bind,
// maintenance info — valid OSB 2.17, deterministic, at least a given size.

package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// plansPerService is the number of plans of each generated service.
const plansPerService = 10

// planSizes name the generated plans of a service, smallest first.
var planSizes = [plansPerService]string{"nano", "micro", "small", "medium", "large",
	"xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge"}

// largeCatalog returns a catalog of at least size bytes, as a broker would
// send it: encoded once, with a trailing newline.
func largeCatalog(size int) []byte {
	var c osb.Catalog
	n := 0
	for i := 0; n < size; i++ {
		s := generatedService(i)
		b, err := json.Marshal(s)
		if err != nil {
			panic("loadbench: generated service does not marshal: " + err.Error())
		}
		n += len(b) + 1
		c.Services = append(c.Services, s)
	}
	body, err := json.Marshal(c)
	if err != nil {
		panic("loadbench: generated catalog does not marshal: " + err.Error())
	}
	return append(body, '\n')
}

// generatedID returns a fixed UUID-shaped id for service i, plan j (j < 0
// for the service itself).
func generatedID(i, j int) string {
	return fmt.Sprintf("6f1c%04x-b3a2-4c1e-9d0f-%012x", i, j+1)
}

// raw marshals v, which cannot fail for the maps and slices used here.
func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("loadbench: " + err.Error())
	}
	return b
}

// generatedService returns service i of the generated catalog.
func generatedService(i int) osb.Service {
	engine := []string{"postgresql", "mysql", "redis", "mongodb", "kafka", "elasticsearch"}[i%6]
	name := fmt.Sprintf("%s-%03d", engine, i)
	s := osb.Service{
		ID:   generatedID(i, -1),
		Name: name,
		Description: fmt.Sprintf("Managed %s clusters with automated backups, point-in-time recovery, "+
			"encryption at rest and in transit, and monitoring (offering %d).", engine, i),
		Tags:                 []string{engine, "database", "managed", "ha", fmt.Sprintf("region-%d", i%4)},
		Bindable:             true,
		InstancesRetrievable: true,
		BindingsRetrievable:  true,
		AllowContextUpdates:  true,
		PlanUpdateable:       true,
		Metadata: raw(map[string]any{
			"displayName":         fmt.Sprintf("Managed %s %d", engine, i),
			"imageUrl":            fmt.Sprintf("https://assets.example.com/logos/%s.svg", engine),
			"longDescription":     strings.Repeat("Provisioned on dedicated virtual machines in three availability zones; ", 3),
			"providerDisplayName": "Example Data Services",
			"documentationUrl":    fmt.Sprintf("https://docs.example.com/%s", name),
			"supportUrl":          "https://support.example.com/",
			"shareable":           true,
		}),
		DashboardClient: &osb.DashboardClient{ID: name + "-dashboard", Secret: "dashboard-secret-" + name,
			RedirectURI: "https://dashboard.example.com/" + name},
	}
	for j, size := range planSizes {
		s.Plans = append(s.Plans, generatedPlan(i, j, engine, size))
	}
	return s
}

// generatedPlan returns plan j of service i.
func generatedPlan(i, j int, engine, size string) osb.Plan {
	free, bindable, updateable := j == 0, true, true
	polling := 3600 * (j + 1)
	memory := 1 << j // GiB
	return osb.Plan{
		ID:   generatedID(i, j),
		Name: size,
		Description: fmt.Sprintf("%s %s: %d GiB memory, %d vCPU, %d GiB storage, %s.",
			engine, size, memory, max(memory/4, 1), 20*memory, []string{"single node", "three nodes"}[min(j, 1)]),
		Metadata: raw(map[string]any{
			"displayName": fmt.Sprintf("%s %s", strings.ToUpper(size[:1])+size[1:], engine),
			"bullets": []string{fmt.Sprintf("%d GiB memory", memory), fmt.Sprintf("%d GiB storage", 20*memory),
				"Daily backups kept 7 days", "99.95% availability"},
			"costs": []map[string]any{{"amount": map[string]float64{"usd": 14.5 * float64(memory), "eur": 13.25 * float64(memory)},
				"unit": "MONTHLY"}},
		}),
		Free:                   &free,
		Bindable:               &bindable,
		PlanUpdateable:         &updateable,
		Schemas:                generatedSchemas(engine),
		MaximumPollingDuration: &polling,
		MaintenanceInfo:        &osb.MaintenanceInfo{Version: fmt.Sprintf("%d.%d.0", 14+j%3, i%10), Description: "OS and engine patches."},
	}
}

// generatedSchemas returns the parameter schemas of a plan of engine.
func generatedSchemas(engine string) *osb.Schemas {
	props := map[string]any{
		"version":          map[string]any{"type": "string", "enum": []string{"13", "14", "15", "16"}, "default": "16"},
		"backup_window":    map[string]any{"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]-[0-2][0-9]:[0-5][0-9]$"},
		"maintenance_day":  map[string]any{"type": "string", "enum": []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}},
		"extensions":       map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": 32},
		"allowed_networks": map[string]any{"type": "array", "items": map[string]any{"type": "string", "format": "ipv4"}},
		"engine_settings": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"},
			"description": "Settings passed to " + engine + " as they are."},
	}
	instance := raw(map[string]any{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
		"properties": props, "additionalProperties": false})
	binding := raw(map[string]any{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
		"properties": map[string]any{
			"role":     map[string]any{"type": "string", "enum": []string{"read-only", "read-write", "admin"}},
			"database": map[string]any{"type": "string", "maxLength": 63},
		}})
	return &osb.Schemas{
		ServiceInstance: &osb.InstanceSchemas{Create: &osb.InputSchema{Parameters: instance},
			Update: &osb.InputSchema{Parameters: instance}},
		ServiceBinding: &osb.BindingSchemas{Create: &osb.InputSchema{Parameters: binding}},
	}
}
