package main

import (
	"io"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

//go:generate sh -c "go run . schema > ../../schema/gateway.schema.json"

// runSchema prints the JSON Schema of gateway.yaml (config.JSONSchema);
// schema/gateway.schema.json is its committed copy, and the Helm chart's
// values.schema.json carries it as the schema of the config value.
func runSchema(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schema", "schema\n\nPrints the JSON Schema (draft-07) of gateway.yaml, for editors\n"+
		"(# yaml-language-server: $schema=...) and validators.", stderr)
	if code, ok := parseFlags(fs, args, false); !ok {
		return code
	}
	if _, err := stdout.Write(config.JSONSchema()); err != nil {
		return exitFailed
	}
	return exitOK
}
