package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// SchemaKind names one of the three parameter schemas a plan may carry
// (OSB 2.13+).
type SchemaKind uint8

// The parameter schemas of a plan.
const (
	// InstanceCreate is schemas.service_instance.create: provision parameters.
	InstanceCreate SchemaKind = iota
	// InstanceUpdate is schemas.service_instance.update: update parameters.
	InstanceUpdate
	// BindingCreate is schemas.service_binding.create: bind parameters.
	BindingCreate

	numSchemaKinds = iota
)

// schemaKindPaths are the catalog paths of the schema kinds below a plan.
var schemaKindPaths = [numSchemaKinds]string{
	InstanceCreate: "service_instance.create",
	InstanceUpdate: "service_instance.update",
	BindingCreate:  "service_binding.create",
}

// String returns the kind's path below a plan's "schemas", such as
// "service_instance.create".
func (k SchemaKind) String() string {
	if int(k) >= numSchemaKinds {
		return "unknown"
	}
	return schemaKindPaths[k]
}

// rawSchema returns the plan's schema of kind k as sent, or nil when the plan
// has none. A JSON null counts as none.
func rawSchema(p *osb.Plan, k SchemaKind) json.RawMessage {
	s := p.Schemas
	if s == nil {
		return nil
	}
	var in *osb.InputSchema
	switch k {
	case InstanceCreate, InstanceUpdate:
		if s.ServiceInstance != nil {
			in = s.ServiceInstance.Create
			if k == InstanceUpdate {
				in = s.ServiceInstance.Update
			}
		}
	case BindingCreate:
		if s.ServiceBinding != nil {
			in = s.ServiceBinding.Create
		}
	}
	if in == nil || len(in.Parameters) == 0 || string(in.Parameters) == "null" {
		return nil
	}
	return in.Parameters
}

// CompiledSchema is a plan's parameter schema, compiled once per catalog
// version. It is immutable and safe for concurrent use. A nil
// *CompiledSchema stands for "no schema" and accepts any parameters.
type CompiledSchema struct {
	schema *jsonschema.Schema
}

// maxSchemaViolations bounds how many violations one refusal lists.
const maxSchemaViolations = 20

// Validate checks request parameters (the "parameters" member of a
// provision, update or bind body, as raw JSON) against the schema. Absent
// parameters (empty, or JSON null) are not checked: the specification makes
// them optional, and for an update they mean "no change". It returns nil, or
// a 400 *osb.Error whose description lists each violation with its location,
// such as
//
//	parameters do not match the plan's schema: parameters/name: missing required property; parameters/size: must be <= 100, got 500
//
// Violations are sorted by location, at most 20 are listed.
func (s *CompiledSchema) Validate(params json.RawMessage) error {
	if s == nil {
		return nil
	}
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil
	}
	v, err := decodeUseNumber(trimmed)
	if err != nil {
		return &osb.Error{Status: http.StatusBadRequest, Err: err,
			Description: "parameters are not valid JSON: " + err.Error()}
	}
	return s.ValidateValue(v)
}

// ValidateValue is Validate for parameters already decoded into a Go value,
// as encoding/json decodes into any; decode with json.Decoder.UseNumber to
// keep large numbers exact. A nil v (absent parameters, or JSON null) is not
// checked.
func (s *CompiledSchema) ValidateValue(v any) error {
	if s == nil || v == nil {
		return nil
	}
	err := s.schema.Validate(v)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return &osb.Error{Status: http.StatusBadRequest, Err: err,
			Description: "parameters cannot be checked against the plan's schema: " + err.Error()}
	}
	list := joinSchemaViolations(flattenViolations(verr), "parameters", maxSchemaViolations)
	return &osb.Error{Status: http.StatusBadRequest, Err: err,
		Description: "parameters do not match the plan's schema: " + list}
}

// decodeUseNumber decodes one JSON value with numbers kept as json.Number.
func decodeUseNumber(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

// schemaBase is the URL a parameter schema is compiled under. The .invalid
// top-level domain (RFC 2606) can never resolve; nothing is fetched anyway.
const schemaBase = "https://osb-gateway.invalid/"

// schemaURL is the location of the one document each compiler holds.
const schemaURL = schemaBase + "parameters.json"

// errExternalRef is what the loader answers for every URL it is asked for.
var errExternalRef = errors.New("external references are refused")

// refusingLoader is the compiler's URL loader: it loads nothing, so any
// reference outside the schema document fails to compile. The metaschemas of
// the known drafts are built into the library and never reach a loader.
type refusingLoader struct{}

// Load implements jsonschema.URLLoader.
func (refusingLoader) Load(string) (any, error) { return nil, errExternalRef }

// compileSchema compiles one parameter schema with a compiler of its own, so
// that no schema can reference another plan's. A schema without "$schema" is
// compiled as draft-04, the version the specification requires platforms to
// support. checked are the schema's compile-free problems (checkSchema's):
// the problem compileSchema returns, if any, is the compiler's, and only
// when checked does not already hold it. A nil *CompiledSchema means the
// schema could not be compiled.
func compileSchema(raw json.RawMessage, checked []schemaProblem) (cs *CompiledSchema, problems []schemaProblem) {
	defer func() {
		if r := recover(); r != nil {
			cs, problems = nil, newProblem(checked, errorProblem("the schema cannot be compiled: %v", r))
		}
	}()
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, newProblem(checked, errorProblem("must be a JSON Schema object"))
	}
	doc, err := decodeUseNumber(trimmed)
	if err != nil {
		return nil, newProblem(checked, errorProblem("is not valid JSON: %v", err))
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.UseLoader(refusingLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, newProblem(checked, errorProblem("the schema cannot be compiled: %s", trimBase(err.Error())))
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, newProblem(checked, compileProblem(doc.(map[string]any), err))
	}
	return &CompiledSchema{schema: sch}, nil
}

// newProblem returns p as a list, or nil when checked already holds it.
func newProblem(checked []schemaProblem, p schemaProblem) []schemaProblem {
	if slices.Contains(checked, p) {
		return nil
	}
	return []schemaProblem{p}
}

// compileProblem turns a compiler error into a finding's message.
func compileProblem(obj map[string]any, err error) schemaProblem {
	var (
		load *jsonschema.LoadURLError
		meta *jsonschema.SchemaValidationError
		re   *jsonschema.InvalidRegexError
		verr *jsonschema.ValidationError
	)
	declared, _ := obj["$schema"].(string)
	_, known := lookupSchemaDraft(declared)
	switch {
	case errors.As(err, &load) && declared != "" && !known:
		return unknownDraftProblem(declared)
	case errors.As(err, &load):
		return externalRefProblem(trimBase(load.URL))
	case errors.As(err, &meta) && errors.As(meta.Err, &verr):
		return errorProblem("is not a valid %s schema: %s", schemaDraftName(obj), joinSchemaViolations(flattenViolations(verr), "#", 5))
	case errors.As(err, &meta):
		return errorProblem("is not a valid %s schema: %s", schemaDraftName(obj), trimBase(meta.Err.Error()))
	case errors.As(err, &re):
		return errorProblem("has a pattern Go's regexp package (RE2) cannot compile: %s", trimBase(err.Error()))
	}
	return errorProblem("the schema cannot be compiled: %s", trimBase(err.Error()))
}

// unknownDraftProblem is the problem of a "$schema" naming no draft the
// gateway knows.
func unknownDraftProblem(declared string) schemaProblem {
	return errorProblem(`"$schema" %q is not a JSON Schema draft the gateway knows (%s); custom metaschemas are not supported`,
		declared, knownSchemaDrafts())
}

// externalRefProblem is the problem of a reference the compiler refuses to
// load, ref as the broker wrote it (relative to the document).
func externalRefProblem(ref string) schemaProblem {
	return errorProblem("$ref to %q is an external reference; the specification forbids them and the gateway loads none", ref)
}

// errorProblem is a schemaProblem of severity Error.
func errorProblem(format string, args ...any) schemaProblem {
	return schemaProblem{SeverityError, fmt.Sprintf(format, args...)}
}

// trimBase removes the gateway's made-up base URL from a message, leaving
// references as the broker wrote them.
func trimBase(s string) string {
	s = strings.ReplaceAll(s, schemaURL, "")
	return strings.ReplaceAll(s, schemaBase, "")
}
