package deploytest

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// TestValuesSchemaCarriesGatewaySchema: the chart's values.schema.json
// validates config with the gateway's own schema (schema/gateway.schema.json,
// generated from internal/config), so the two cannot drift apart. With
// OSB_GATEWAY_UPDATE_SCHEMA=1 the test copies the gateway's schema in.
func TestValuesSchemaCarriesGatewaySchema(t *testing.T) {
	var gw, values map[string]any
	readJSON(t, "../../schema/gateway.schema.json", &gw)
	readJSON(t, chartDir+"/values.schema.json", &values)
	delete(gw, "$schema")
	props := values["properties"].(map[string]any)
	got := props["config"].(map[string]any)
	gw["title"] = got["title"] // the chart's own words for the config value
	if reflect.DeepEqual(got, gw) {
		return
	}
	if os.Getenv("OSB_GATEWAY_UPDATE_SCHEMA") == "1" {
		props["config"] = gw
		out, err := json.MarshalIndent(values, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(chartDir+"/values.schema.json", append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("values.schema.json: config copied from schema/gateway.schema.json")
		return
	}
	t.Error("values.schema.json's config is not schema/gateway.schema.json: run OSB_GATEWAY_UPDATE_SCHEMA=1 go test -run ValuesSchema ./... in deploy/test")
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
