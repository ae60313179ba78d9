package rules

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// schemaViolation is one reason a value fails a schema: where (the JSON
// pointer tokens of the offending value) and what, in words of the
// gateway's own, so that descriptions do not change with the library's
// wording.
type schemaViolation struct {
	loc []string
	msg string
}

// flattenViolations turns jsonschema's tree of errors into its leaf causes,
// sorted by location and then message, without duplicates.
func flattenViolations(e *jsonschema.ValidationError) []schemaViolation {
	var vs []schemaViolation
	collectViolations(e, &vs)
	slices.SortFunc(vs, func(a, b schemaViolation) int {
		if c := compareInstanceLocs(a.loc, b.loc); c != 0 {
			return c
		}
		return strings.Compare(a.msg, b.msg)
	})
	return slices.CompactFunc(vs, func(a, b schemaViolation) bool {
		return a.msg == b.msg && slices.Equal(a.loc, b.loc)
	})
}

// collectViolations appends e's leaf causes to vs. Keywords about named
// properties (required, additionalProperties, dependencies, propertyNames)
// yield one violation per property, located at the property; anyOf and
// oneOf yield one violation for all their alternatives.
func collectViolations(e *jsonschema.ValidationError, vs *[]schemaViolation) {
	loc := e.InstanceLocation
	add := func(l []string, msg string) { *vs = append(*vs, schemaViolation{l, msg}) }
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, p := range k.Missing {
			add(childLoc(loc, p), "missing required property")
		}
	case *kind.Dependency:
		for _, p := range k.Missing {
			add(childLoc(loc, p), fmt.Sprintf("missing property required when %s is present", strconv.Quote(k.Prop)))
		}
		collectViolationCauses(e, vs)
	case *kind.DependentRequired:
		for _, p := range k.Missing {
			add(childLoc(loc, p), fmt.Sprintf("missing property required when %s is present", strconv.Quote(k.Prop)))
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			add(childLoc(loc, p), "property not allowed")
		}
	case *kind.PropertyNames:
		add(childLoc(loc, k.Property), `property name not allowed by "propertyNames"`)
	case *kind.AnyOf:
		alternativeViolations(e, vs, `must match at least one of the "anyOf" schemas`)
	case *kind.OneOf:
		if len(k.Subschemas) >= 2 {
			add(loc, fmt.Sprintf(`must match exactly one of the "oneOf" schemas, matched schemas %d and %d`, k.Subschemas[0], k.Subschemas[1]))
			return
		}
		alternativeViolations(e, vs, `must match exactly one of the "oneOf" schemas, matched none`)
	default:
		if msg, ok := violationMessage(e.ErrorKind); ok {
			add(loc, msg)
			return
		}
		if len(e.Causes) == 0 {
			add(loc, fmt.Sprintf("must satisfy %q", strings.Join(e.ErrorKind.KeywordPath(), "/")))
			return
		}
		collectViolationCauses(e, vs)
	}
}

// collectViolationCauses collects each of e's causes.
func collectViolationCauses(e *jsonschema.ValidationError, vs *[]schemaViolation) {
	for _, c := range e.Causes {
		collectViolations(c, vs)
	}
}

// alternativeViolations reports a failed anyOf or oneOf. When every alternative
// failed for one reason about the value itself, the reasons are joined with
// "or" ("must be of type string, got boolean, or must be of type integer, got
// boolean"); otherwise the summary stands for them.
func alternativeViolations(e *jsonschema.ValidationError, vs *[]schemaViolation, summary string) {
	msgs := make([]string, 0, len(e.Causes))
	for _, c := range e.Causes {
		var sub []schemaViolation
		collectViolations(c, &sub)
		if len(sub) != 1 || !slices.Equal(sub[0].loc, e.InstanceLocation) {
			msgs = nil
			break
		}
		msgs = append(msgs, sub[0].msg)
	}
	if len(msgs) == 0 {
		*vs = append(*vs, schemaViolation{e.InstanceLocation, summary})
		return
	}
	*vs = append(*vs, schemaViolation{e.InstanceLocation, strings.Join(msgs, ", or ")})
}

// violationMessage words the keywords whose failure is about the value itself.
// It reports false for keywords that only group other failures.
func violationMessage(k jsonschema.ErrorKind) (string, bool) {
	switch k := k.(type) {
	case *kind.Type:
		return fmt.Sprintf("must be of type %s, got %s", strings.Join(k.Want, " or "), k.Got), true
	case *kind.Enum:
		return "must be " + enumWords(k.Want) + ", got " + displayValue(k.Got), true
	case *kind.Const:
		return "must be " + displayValue(k.Want) + ", got " + displayValue(k.Got), true
	case *kind.Format:
		return fmt.Sprintf("must be a valid %s, got %s", k.Want, displayValue(k.Got)), true
	case *kind.Minimum:
		return boundMessage(">=", k.Want, k.Got), true
	case *kind.Maximum:
		return boundMessage("<=", k.Want, k.Got), true
	case *kind.ExclusiveMinimum:
		return boundMessage(">", k.Want, k.Got), true
	case *kind.ExclusiveMaximum:
		return boundMessage("<", k.Want, k.Got), true
	case *kind.MultipleOf:
		return fmt.Sprintf("must be a multiple of %s, got %s", formatRat(k.Want), formatRat(k.Got)), true
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %s long, got %d", countNoun(k.Want, "character"), k.Got), true
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %s long, got %d", countNoun(k.Want, "character"), k.Got), true
	case *kind.Pattern:
		return fmt.Sprintf("must match the pattern %s, got %s", strconv.Quote(k.Want), displayValue(k.Got)), true
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %s, got %d", countNoun(k.Want, "item"), k.Got), true
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %s, got %d", countNoun(k.Want, "item"), k.Got), true
	case *kind.AdditionalItems:
		return fmt.Sprintf("has %s more than the schema allows", countNoun(k.Count, "item")), true
	case *kind.UniqueItems:
		return fmt.Sprintf("must not contain duplicates, items %d and %d are equal", k.Duplicates[0], k.Duplicates[1]), true
	case *kind.Contains:
		return `must contain an item matching the "contains" schema`, true
	case *kind.MinContains:
		return fmt.Sprintf(`must contain at least %s matching the "contains" schema, got %d`, countNoun(k.Want, "item"), len(k.Got)), true
	case *kind.MaxContains:
		return fmt.Sprintf(`must contain at most %s matching the "contains" schema, got %d`, countNoun(k.Want, "item"), len(k.Got)), true
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %s, got %d", countNoun(k.Want, "property"), k.Got), true
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %s, got %d", countNoun(k.Want, "property"), k.Got), true
	case *kind.Not:
		return `must not match the "not" schema`, true
	case *kind.FalseSchema:
		return "not allowed", true
	case *kind.ContentEncoding:
		return fmt.Sprintf("must be %s-encoded", k.Want), true
	case *kind.ContentMediaType:
		return "must be of media type " + k.Want, true
	case *kind.RefCycle:
		return "cannot be checked: the schema's references form a cycle", true
	case *kind.InvalidJsonValue:
		return fmt.Sprintf("is not a JSON value (%T)", k.Value), true
	}
	return "", false
}

// boundMessage words a failed numeric limit: "must be <= 100, got 500".
func boundMessage(op string, want, got *big.Rat) string {
	return fmt.Sprintf("must be %s %s, got %s", op, formatRat(want), formatRat(got))
}

// formatRat formats a number from the schema or the parameters: integers
// exactly, others as the shortest float.
func formatRat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// countNoun words a quantity with its noun: "1 item", "3 items", "2 properties".
func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return strconv.Itoa(n) + " " + strings.TrimSuffix(noun, "y") + "ies"
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// maxEnumValuesShown bounds how many allowed values a message lists.
const maxEnumValuesShown = 10

// enumWords words the allowed values of an enum.
func enumWords(want []any) string {
	if len(want) == 1 {
		return displayValue(want[0])
	}
	shown := make([]string, 0, min(len(want), maxEnumValuesShown))
	for _, w := range want[:min(len(want), maxEnumValuesShown)] {
		shown = append(shown, displayValue(w))
	}
	s := "one of " + strings.Join(shown, ", ")
	if len(want) > maxEnumValuesShown {
		s += fmt.Sprintf(" (and %d more)", len(want)-maxEnumValuesShown)
	}
	return s
}

// maxValueRunesShown bounds how much of a string value a message quotes.
const maxValueRunesShown = 40

// displayValue shows a JSON value in a message: strings quoted (and cut short),
// numbers and literals as written, objects and arrays by their type.
func displayValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		if utf8.RuneCountInString(v) > maxValueRunesShown {
			r := []rune(v)
			return strconv.Quote(string(r[:maxValueRunesShown])) + "…"
		}
		return strconv.Quote(v)
	case json.Number:
		return v.String()
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprint(v)
}

// childLoc returns the location of property p of the value at loc.
func childLoc(loc []string, p string) []string {
	return append(slices.Clip(loc), p)
}

// compareInstanceLocs orders locations token by token; array indexes compare as
// numbers, so /items/2 comes before /items/10.
func compareInstanceLocs(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] == b[i] {
			continue
		}
		x, errX := strconv.Atoi(a[i])
		y, errY := strconv.Atoi(b[i])
		if errX == nil && errY == nil {
			return cmp.Compare(x, y)
		}
		return strings.Compare(a[i], b[i])
	}
	return cmp.Compare(len(a), len(b))
}

// pointerTokenEscaper escapes a JSON pointer token (RFC 6901, section 3).
var pointerTokenEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// instancePointer formats a location as a JSON pointer (RFC 6901) after prefix:
// "parameters/size", or just "parameters" for the value itself.
func instancePointer(prefix string, loc []string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, tok := range loc {
		b.WriteByte('/')
		b.WriteString(pointerTokenEscaper.Replace(tok))
	}
	return b.String()
}

// joinSchemaViolations lists violations as "location: message" separated by "; ",
// at most limit of them.
func joinSchemaViolations(vs []schemaViolation, prefix string, limit int) string {
	parts := make([]string, 0, min(len(vs), limit)+1)
	for i, v := range vs {
		if i == limit {
			parts = append(parts, fmt.Sprintf("and %d more", len(vs)-limit))
			break
		}
		parts = append(parts, instancePointer(prefix, v.loc)+": "+v.msg)
	}
	return strings.Join(parts, "; ")
}
