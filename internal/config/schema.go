package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// JSONSchema returns the JSON Schema (draft-07) of gateway.yaml, derived
// from Config by reflection: the yaml tags give the keys, the validate tags
// the bounds (required, oneof → enum, min/max, gt/gte/lt/lte), and every
// object refuses keys it does not name (additionalProperties: false), as
// the strict decoder does. Durations are strings in Go's syntax ("90s",
// "1m30s"). Every scalar may also be a ${NAME} reference, which Load
// expands before it converts the value. The schema is one tree without
// $ref, so that the Helm chart can carry it as its config value's schema.
//
// It is looser than Load where a check needs more than one key or the
// file system (prefixes, routes to known brokers, certificate files): a
// file the schema accepts can still be refused by Load, never the
// reverse. "osb-gateway schema" prints it; schema/gateway.schema.json is
// its committed copy.
func JSONSchema() []byte {
	g := schemaGen{defaulted: defaultedFields()}
	root := g.object(reflect.TypeFor[Config]())
	root["$schema"] = "http://json-schema.org/draft-07/schema#"
	root["title"] = "osb-gateway gateway.yaml"
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(root); err != nil {
		panic(err) // maps of strings, numbers and bools always encode
	}
	return b.Bytes()
}

// Patterns of the scalars the decoder converts from strings.
const (
	// envRefPattern matches a value that holds a ${NAME} reference.
	envRefPattern = `\$\{[A-Za-z_][A-Za-z0-9_]*\}`
	// durationPattern is time.ParseDuration's syntax.
	durationPattern = `^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$`
	// versionPattern is an OSB API version, MAJOR.MINOR.
	versionPattern = `^[0-9]+\.[0-9]+$`
)

type schema = map[string]any

// fieldKey names a struct field for the defaulted set.
type fieldKey struct {
	typ   reflect.Type
	field string
}

type schemaGen struct {
	defaulted map[fieldKey]bool // fields ApplyDefaults fills when zero
}

// defaultedFields finds the fields ApplyDefaults fills when they are zero,
// by applying the defaults to a zero Config with one of each list element:
// a required or lower-bounded field that has a default may be left out of
// the file, or written as its zero value.
func defaultedFields() map[fieldKey]bool {
	zero := Config{
		Tenants: []Tenant{{Credentials: []Credential{{}}, Routes: []Route{{}}}},
		Brokers: []Broker{{}},
	}
	c := zero
	c.Tenants = []Tenant{{Credentials: []Credential{{}}, Routes: []Route{{}}}}
	c.Brokers = []Broker{{}}
	c.ApplyDefaults()
	out := map[fieldKey]bool{}
	compareDefaults(reflect.ValueOf(zero), reflect.ValueOf(c), out)
	return out
}

func compareDefaults(zero, filled reflect.Value, out map[fieldKey]bool) {
	switch filled.Kind() {
	case reflect.Pointer:
		if !filled.IsNil() {
			z := reflect.New(filled.Type().Elem()).Elem()
			if !zero.IsNil() {
				z = zero.Elem()
			}
			compareDefaults(z, filled.Elem(), out)
		}
	case reflect.Struct:
		for i := range filled.NumField() {
			f := filled.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if !filled.Field(i).IsZero() && zero.Field(i).IsZero() {
				out[fieldKey{filled.Type(), f.Name}] = true
			}
			compareDefaults(zero.Field(i), filled.Field(i), out)
		}
	case reflect.Slice:
		for i := 0; i < filled.Len() && i < zero.Len(); i++ {
			compareDefaults(zero.Index(i), filled.Index(i), out)
		}
	}
}

// object is the schema of a struct type: its yaml keys, nothing else.
func (g schemaGen) object(t reflect.Type) schema {
	props := schema{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := yamlKey(f)
		if !ok {
			continue
		}
		s, req := g.field(t, f)
		props[name] = s
		if req {
			required = append(required, name)
		}
	}
	s := schema{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// field is the schema of one struct field and whether its key is required.
func (g schemaGen) field(parent reflect.Type, f reflect.StructField) (schema, bool) {
	t := f.Type
	pointer := t.Kind() == reflect.Pointer
	if pointer {
		t = t.Elem()
	}
	s := g.value(t)
	rules := tagRules(f.Tag.Get("validate"))
	defaulted := g.defaulted[fieldKey{parent, f.Name}]
	required := false
	for _, r := range rules {
		switch r.name {
		case "required":
			required = !defaulted
			if t.Kind() == reflect.String && !defaulted {
				addAll(s, schema{"minLength": 1})
			}
		case "oneof":
			s = g.enum(s, t, strings.Fields(r.arg))
		case "min", "max", "gt", "gte", "lt", "lte", "len":
			g.bound(s, t, r, defaulted && !pointer)
		}
	}
	return s, required
}

// enum restricts s to values. A string's value that reads as a number
// (min_version: 1.2) may be written unquoted too: the decoder reads the
// text of the YAML scalar.
func (g schemaGen) enum(s schema, t reflect.Type, values []string) schema {
	var enum []any
	for _, v := range values {
		enum = append(enum, scalarOf(t, v))
	}
	if t.Kind() == reflect.String {
		for _, v := range values {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				enum = append(enum, n)
			}
		}
		return anyOrEnv(schema{"enum": enum}) // a ${NAME} reference is checked after expansion
	}
	addAll(s, schema{"enum": enum})
	return s
}

// bound adds a min/max rule to s: items for a list, length for a string,
// the value for a number (where zeroOK, a zero value gets the default and
// stays allowed). Duration bounds stay with Load: a pattern cannot compare.
func (g schemaGen) bound(s schema, t reflect.Type, r tagRule, zeroOK bool) {
	n, err := strconv.ParseFloat(r.arg, 64)
	if err != nil {
		return // a duration such as 10m: Load checks it
	}
	key := map[string]map[reflect.Kind]string{
		"min": {reflect.Slice: "minItems", reflect.Map: "minProperties", reflect.String: "minLength"},
		"max": {reflect.Slice: "maxItems", reflect.Map: "maxProperties", reflect.String: "maxLength"},
	}[r.name]
	if r.name == "min" || r.name == "max" {
		if k, ok := key[t.Kind()]; ok {
			addAll(s, schema{k: int(n)})
			return
		}
	}
	if !isNumber(t) {
		return
	}
	var b schema
	switch r.name {
	case "min", "gte":
		b = schema{"minimum": n}
	case "max", "lte":
		b = schema{"maximum": n}
	case "gt":
		b = schema{"exclusiveMinimum": n}
	case "lt":
		b = schema{"exclusiveMaximum": n}
	default:
		return
	}
	if zeroOK && ((b["minimum"] != nil && n > 0) || (b["exclusiveMinimum"] != nil && n >= 0)) {
		b = schema{"anyOf": []any{schema{"const": 0}, b}}
		addAll(s, schema{"allOf": []any{b}})
		return
	}
	addAll(s, b)
}

// value is the schema of a type without its field's rules.
func (g schemaGen) value(t reflect.Type) schema {
	switch {
	case t == durationType:
		return anyOrEnv(schema{"type": "string", "pattern": durationPattern}, schema{"const": 0})
	case t == retiredType:
		return g.retiredSchema(t)
	case t == versionType:
		// 2.13 unquoted is a YAML number; the decoder reads its text.
		return anyOrEnv(schema{"type": "string", "pattern": versionPattern}, schema{"type": "number"})
	}
	switch t.Kind() {
	case reflect.Struct:
		return g.object(t)
	case reflect.Pointer:
		return g.value(t.Elem())
	case reflect.Slice:
		return schema{"type": "array", "items": g.value(t.Elem())}
	case reflect.Map:
		return schema{"type": "object", "additionalProperties": g.value(t.Elem())}
	case reflect.String:
		return schema{"type": "string"}
	case reflect.Bool:
		return anyOrEnv(schema{"type": "boolean"})
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return anyOrEnv(schema{"type": "integer"})
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return anyOrEnv(schema{"type": "integer", "minimum": 0})
	case reflect.Float32, reflect.Float64:
		return anyOrEnv(schema{"type": "number"})
	}
	panic(fmt.Sprintf("config.JSONSchema: no schema for %s", t))
}

// anyOrEnv is a scalar of one of the shapes given, or a string with a
// ${NAME} reference (its value is checked by Load after expansion).
func anyOrEnv(shapes ...schema) schema {
	alts := make([]any, 0, len(shapes)+1)
	for _, s := range shapes {
		alts = append(alts, s)
	}
	return schema{"anyOf": append(alts, schema{"type": "string", "pattern": envRefPattern})}
}

// addAll adds rules to s. A scalar that may be a ${NAME} reference carries
// its rules in its non-reference shapes; a string reference is checked
// after expansion, by Load.
func addAll(s schema, rules schema) {
	alts, ok := s["anyOf"].([]any)
	if !ok {
		for k, v := range rules {
			s[k] = v
		}
		return
	}
	for _, a := range alts[:len(alts)-1] {
		a := a.(schema)
		if a["const"] != nil {
			continue // a duration's 0
		}
		for k, v := range rules {
			a[k] = v
		}
	}
}

func isNumber(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return t != durationType
	}
	return false
}

// scalarOf converts an enum value of a validate tag to t's JSON type.
func scalarOf(t reflect.Type, v string) any {
	if isNumber(t) {
		if n, err := strconv.ParseFloat(v, 64); err == nil {
			return n
		}
	}
	return v
}

type tagRule struct{ name, arg string }

// tagRules splits a validate tag into its rules; those after "dive" apply
// to a list's elements, whose own schema carries them, and are left out.
func tagRules(tag string) []tagRule {
	var out []tagRule
	for _, r := range strings.Split(tag, ",") {
		if r == "dive" {
			break
		}
		name, arg, _ := strings.Cut(r, "=")
		if name != "" {
			out = append(out, tagRule{name, arg})
		}
	}
	return out
}
