package rules

import (
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// benchProvision is Cloud Controller's provision of a plan without a
// parameter schema or maintenance_info, so that the catalog benchmark
// measures the request rules and the lookups, not schema validation.
const benchProvision = `{"service_id":"s-mysql","plan_id":"p-large","organization_guid":"8a1e0f2c-1d3b-4c5e-9f7a-0b1c2d3e4f50",` +
	`"space_guid":"9b2f1a3d-2e4c-5d6f-a08b-1c2d3e4f5061","context":{"platform":"cloudfoundry",` +
	`"organization_guid":"8a1e0f2c-1d3b-4c5e-9f7a-0b1c2d3e4f50","space_guid":"9b2f1a3d-2e4c-5d6f-a08b-1c2d3e4f5061",` +
	`"organization_name":"acme","space_name":"prod","instance_name":"orders-db"},"parameters":{"size":10,"backups":true}}`

func BenchmarkCheckRequestProvision(b *testing.B) {
	body := []byte(benchProvision)
	v := osb.MustParseVersion("2.15")
	for _, bc := range []struct {
		name string
		cat  CatalogView
	}{{"no_catalog", nil}, {"catalog", testCatalog()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, vs := CheckRequest(provisionCall, v, body, bc.cat); vs != nil {
					b.Fatal(vs)
				}
			}
		})
	}
}

func BenchmarkCheckResponse(b *testing.B) {
	v := osb.MustParseVersion("2.15")
	for _, bc := range []struct {
		name   string
		call   Call
		status int
		body   string
	}{
		{"provision_202", provisionCall, 202, `{"dashboard_url":"https://db.example.com/i-1","operation":"task-1"}`},
		{"bind_201", bindCall, 201, `{"credentials":{"uri":"mysql://u:p@db:3306/x","username":"u","password":"p"}}`},
		{"last_operation_200", instanceLastOp, 200, `{"state":"in progress","description":"10% done"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			opts := ResponseOptions{Request: &Request{ServiceID: "s-mysql"}}
			b.ReportAllocs()
			for b.Loop() {
				if _, vs := CheckResponse(bc.call, v, bc.status, body, testCatalog(), opts); vs != nil {
					b.Fatal(vs)
				}
			}
		})
	}
}

func BenchmarkBridgeProvision(b *testing.B) {
	body := []byte(`{"service_id":"s-mysql","plan_id":"p-large","context":{"platform":"cloudfoundry",` +
		`"organization_guid":"8a1e0f2c-1d3b-4c5e-9f7a-0b1c2d3e4f50","space_guid":"9b2f1a3d-2e4c-5d6f-a08b-1c2d3e4f5061"}}`)
	v := osb.MustParseVersion("2.11")
	b.ReportAllocs()
	for b.Loop() {
		if _, changed, err := Bridge(provisionCall, body, v2_17, v); !changed || err != nil {
			b.Fatal(changed, err)
		}
	}
}
