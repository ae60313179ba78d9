package policy

import (
	"math"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
)

// MaxCost bounds a rule's estimated cost, in CEL's cost units (about one
// per value compared, element visited or character matched): a rule whose
// estimate exceeds it is refused at load. A rule with a comprehension is
// held to it as it runs too (an evaluation that exceeds it fails, and so
// denies). It is the budget Kubernetes gives one ValidatingAdmissionPolicy
// evaluation.
const MaxCost = 10_000_000

// SizeHint is the size the cost estimate assumes of every list and map a
// call offers, and StringSizeHint of every string (a request body is at
// most listen.max_body_bytes, 1 MiB by default, and rarely holds more than
// a few hundred values): one comprehension over request.parameters
// estimates well under MaxCost, two nested ones over it. What a call
// really holds is bounded at evaluation by MaxCost all the same.
const (
	SizeHint       = 1000
	StringSizeHint = 256
)

// env is the CEL environment every rule compiles in: the variables, the
// standard library with ext's strings and math, and the helpers.
var env = sync.OnceValues(func() (*cel.Env, error) {
	opts := append(declarations(),
		cel.CrossTypeNumericComparisons(true),
		cel.DefaultUTCTimeZone(true),
		ext.Strings(),
		ext.Math(),
		cel.Function("glob", cel.Overload("glob_string_string",
			[]*cel.Type{cel.StringType, cel.StringType}, cel.BoolType,
			cel.BinaryBinding(glob))),
		cel.Function("daytime", cel.Overload("daytime_timestamp_string",
			[]*cel.Type{cel.TimestampType, cel.StringType}, cel.StringType,
			cel.BinaryBinding(daytime))),
		cel.Function("quantity", cel.Overload("quantity_dyn",
			[]*cel.Type{cel.DynType}, cel.IntType, cel.UnaryBinding(quantity))),
		cel.Function("num", cel.Overload("num_dyn",
			[]*cel.Type{cel.DynType}, cel.DoubleType, cel.UnaryBinding(num))),
	)
	return cel.NewEnv(opts...)
})

// glob reports whether name matches pattern: * any run of characters, ?
// one character, [a-z] a class (path.Match, where / is an ordinary
// character here).
func glob(name, pattern ref.Val) ref.Val {
	n, ok1 := name.(types.String)
	p, ok2 := pattern.(types.String)
	if !ok1 || !ok2 {
		return types.NewErr("glob needs two strings")
	}
	ok, err := path.Match(strings.ReplaceAll(string(p), "/", "\x00"), strings.ReplaceAll(string(n), "/", "\x00"))
	if err != nil {
		return types.NewErr("glob pattern %q: %v", string(p), err)
	}
	return types.Bool(ok)
}

// daytime is the time of day of ts in the IANA time zone, "15:04".
func daytime(ts, zone ref.Val) ref.Val {
	t, ok1 := ts.(types.Timestamp)
	z, ok2 := zone.(types.String)
	if !ok1 || !ok2 {
		return types.NewErr("daytime needs a timestamp and a time zone name")
	}
	loc, err := time.LoadLocation(string(z))
	if err != nil {
		return types.NewErr("daytime: unknown time zone %q", string(z))
	}
	return types.String(t.Time.In(loc).Format("15:04"))
}

// quantityUnits are the suffixes quantity reads, binary and decimal.
var quantityUnits = []struct {
	suffix string
	factor float64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// quantity reads a size such as "10Gi", "512MB", "2G" or a plain number
// into an int (bytes, or units); a number passes as it is.
func quantity(v ref.Val) ref.Val {
	switch x := v.(type) {
	case types.Int:
		return x
	case types.Double:
		return types.Int(int64(x))
	case types.String:
		s := strings.TrimSpace(string(x))
		factor := 1.0
		for _, u := range quantityUnits {
			if strings.HasSuffix(s, u.suffix) {
				s, factor = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.factor
				break
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f*factor) > math.MaxInt64/2 {
			return types.NewErr("quantity: %q is not a size such as 10Gi or 512MB", string(x))
		}
		return types.Int(int64(f * factor))
	}
	return types.NewErr("quantity needs a string or a number, got %s", v.Type().TypeName())
}

// num reads a number, or a string holding one, as a double.
func num(v ref.Val) ref.Val {
	switch x := v.(type) {
	case types.Int:
		return types.Double(x)
	case types.Uint:
		return types.Double(x)
	case types.Double:
		return x
	case types.String:
		f, err := strconv.ParseFloat(strings.TrimSpace(string(x)), 64)
		if err != nil {
			return types.NewErr("num: %q is not a number", string(x))
		}
		return types.Double(f)
	}
	return types.NewErr("num needs a number or a string, got %s", v.Type().TypeName())
}

// estimator gives the cost estimate its sizes: SizeHint for what a call
// offers, the standard costs for every function (the helpers are linear
// in their strings, as the standard estimate of a call assumes).
type estimator struct{}

func (estimator) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if len(n.Path()) > 0 {
		if t := n.Type(); t != nil && t.IsExactType(types.StringType) {
			return &cost.SizeEstimate{Min: 0, Max: StringSizeHint}
		}
		return &cost.SizeEstimate{Min: 0, Max: SizeHint}
	}
	return nil
}

func (estimator) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}
