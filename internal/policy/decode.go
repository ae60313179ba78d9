package policy

import (
	"errors"
	"strconv"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
)

// maxDepth bounds the nesting decodeObject follows.
const maxDepth = 64

// errDepth: the document nests deeper than maxDepth.
var errDepth = errors.New("nested too deep")

// decodeObject decodes a JSON object straight into CEL values (one pass
// with jsonfast.Scanner, no Go maps in between): objects are maps, arrays
// lists, integral numbers int, other numbers double. nil for anything
// else, and for a document that does not decode or nests deeper than
// maxDepth. Measured (BenchmarkEvaluate): about half the time of
// json.Unmarshal and a conversion of its result.
func decodeObject(b []byte) map[string]ref.Val {
	sc := jsonfast.NewScanner(b)
	sc.SkipSpace()
	if sc.Peek() != '{' {
		return nil
	}
	m, err := readObject(&sc, 0)
	if err != nil {
		return nil
	}
	if sc.SkipSpace(); sc.Offset() != len(b) {
		return nil // trailing bytes: not one JSON document
	}
	return m
}

// readObject reads the object at the scanner's position.
func readObject(sc *jsonfast.Scanner, depth int) (map[string]ref.Val, error) {
	sc.Advance() // {
	m := map[string]ref.Val{}
	for first := true; ; first = false {
		sc.SkipSpace()
		if sc.Peek() == '}' && first {
			sc.Advance()
			return m, nil
		}
		k, err := sc.ReadString()
		if err != nil {
			return nil, err
		}
		if sc.SkipSpace(); sc.Peek() != ':' {
			return nil, jsonfast.ErrSyntax
		}
		sc.Advance()
		v, err := readValue(sc, depth+1)
		if err != nil {
			return nil, err
		}
		m[key(k)] = v
		sc.SkipSpace()
		switch sc.Peek() {
		case ',':
			sc.Advance()
		case '}':
			sc.Advance()
			return m, nil
		default:
			return nil, jsonfast.ErrSyntax
		}
	}
}

// readValue reads the value at the scanner's position.
func readValue(sc *jsonfast.Scanner, depth int) (ref.Val, error) {
	if depth > maxDepth {
		return nil, errDepth
	}
	sc.SkipSpace()
	switch sc.Peek() {
	case '{':
		m, err := readObject(sc, depth)
		if err != nil {
			return nil, err
		}
		return mapVal(m), nil
	case '[':
		sc.Advance()
		var l []ref.Val
		for first := true; ; first = false {
			sc.SkipSpace()
			if sc.Peek() == ']' && first {
				sc.Advance()
				return types.NewRefValList(types.DefaultTypeAdapter, l), nil
			}
			v, err := readValue(sc, depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
			sc.SkipSpace()
			switch sc.Peek() {
			case ',':
				sc.Advance()
			case ']':
				sc.Advance()
				return types.NewRefValList(types.DefaultTypeAdapter, l), nil
			default:
				return nil, jsonfast.ErrSyntax
			}
		}
	case '"':
		s, err := sc.ReadString()
		if err != nil {
			return nil, err
		}
		return types.String(s), nil
	}
	lit, err := sc.Literal()
	if err != nil {
		return nil, err
	}
	switch string(lit) {
	case "true":
		return types.True, nil
	case "false":
		return types.False, nil
	case "null":
		return types.NullValue, nil
	}
	if i, err := strconv.ParseInt(string(lit), 10, 64); err == nil && i >= -maxExactInt && i <= maxExactInt {
		return types.Int(i), nil // beyond, a double, as encoding/json reads it (and CEL would write it as a string)
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, jsonfast.ErrSyntax
	}
	if i := int64(f); float64(i) == f && f > -maxExactInt && f < maxExactInt {
		return types.Int(i), nil // 1e3, 5.0
	}
	return types.Double(f), nil
}

// key is k as a string; the members every OSB request has cost no
// allocation.
func key(k []byte) string {
	switch string(k) { // compiled without converting k
	case "service_id":
		return "service_id"
	case "plan_id":
		return "plan_id"
	case "organization_guid":
		return "organization_guid"
	case "space_guid":
		return "space_guid"
	case "context":
		return "context"
	case "parameters":
		return "parameters"
	case "platform":
		return "platform"
	case "organization_name":
		return "organization_name"
	case "space_name":
		return "space_name"
	case "namespace":
		return "namespace"
	case "instance_name":
		return "instance_name"
	case "previous_values":
		return "previous_values"
	case "maintenance_info":
		return "maintenance_info"
	case "app_guid":
		return "app_guid"
	case "bind_resource":
		return "bind_resource"
	}
	return string(k)
}

// maxExactInt is the largest integer a float64 holds exactly.
const maxExactInt = 1 << 53
