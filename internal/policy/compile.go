package policy

import (
	"fmt"
	"slices"
	"strings"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
)

// Problem is one thing wrong with a policy, found at load.
type Problem struct {
	// Field is the policy's key the problem is in: "name", "mode",
	// "match.endpoints", "deny", "require", "message", "defaults.<param>"
	// or "force.<param>".
	Field string
	// Message says what is wrong; for a rule, CEL's own message with the
	// rule's line and column ("undeclared reference to 'x' (at 1:5)").
	Message string
}

// Policy is a compiled policy: its spec and its programs. Immutable and
// safe for concurrent use.
type Policy struct {
	Spec
	deny, require, message *program
	defaults, force        []param
}

// param is one parameter a policy defaults or forces.
type param struct {
	name string
	prg  *program
}

// program is one compiled rule and its source.
type program struct {
	src           string
	prg           cel.Program
	comprehension bool // it has one: its cost is tracked as it runs
}

// Compile compiles s, or returns every problem it has.
func Compile(s Spec) (*Policy, []Problem) {
	e, err := env()
	if err != nil {
		return nil, []Problem{{Field: "name", Message: "the CEL environment: " + err.Error()}}
	}
	var probs []Problem
	add := func(field, format string, args ...any) {
		probs = append(probs, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if s.Name == "" {
		add("name", "is required: it names the policy in refusals, audit records and metrics")
	}
	if s.Mode != "" && s.Mode != ModeEnforce && s.Mode != ModeReport {
		add("mode", "must be enforce or report, got %q", s.Mode)
	}
	for _, ep := range s.Match.Endpoints {
		if !slices.Contains(Endpoints, ep) {
			add("match.endpoints", "must be among %s, got %q", strings.Join(Endpoints, ", "), ep)
		}
	}
	if s.Deny == "" && s.Require == "" && len(s.Defaults) == 0 && len(s.Force) == 0 {
		add("name", "has nothing to do: give it deny, require, defaults or force")
	}
	p := &Policy{Spec: s}
	rule := func(field, src string, want *cel.Type) *program {
		if src == "" {
			return nil
		}
		prg, comprehension, msg := compileRule(e, src, want)
		if msg != "" {
			add(field, "%s", msg)
			return nil
		}
		return &program{src: src, prg: prg, comprehension: comprehension}
	}
	p.deny = rule("deny", s.Deny, cel.BoolType)
	p.require = rule("require", s.Require, cel.BoolType)
	p.message = rule("message", s.Message, cel.StringType)
	for _, k := range sortedKeys(s.Defaults) {
		if prg := rule("defaults."+k, s.Defaults[k], nil); prg != nil {
			p.defaults = append(p.defaults, param{k, prg})
		}
	}
	for _, k := range sortedKeys(s.Force) {
		if prg := rule("force."+k, s.Force[k], nil); prg != nil {
			p.force = append(p.force, param{k, prg})
		}
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return p, nil
}

// compileRule compiles src, checks its type against want (nil: any) and
// its cost estimate against MaxCost, and reports whether it has a
// comprehension. msg says what is wrong, "" when nothing is.
func compileRule(e *cel.Env, src string, want *cel.Type) (prg cel.Program, comprehension bool, msg string) {
	ast, iss := e.Compile(src)
	if iss.Err() != nil {
		var parts []string
		for _, ce := range iss.Errors() {
			parts = append(parts, fmt.Sprintf("%s (at %d:%d)", ce.Message, ce.Location.Line(), ce.Location.Column()+1))
		}
		return nil, false, "does not compile: " + strings.Join(parts, "; ")
	}
	if out := ast.OutputType(); want != nil && !out.IsExactType(want) && !out.IsExactType(cel.DynType) {
		return nil, false, fmt.Sprintf("must be a %s expression, got one of type %s", want, out)
	}
	est, err := e.EstimateCost(ast, estimator{})
	if err != nil {
		return nil, false, "has no cost estimate: " + err.Error()
	}
	if est.Max > MaxCost {
		return nil, false, fmt.Sprintf("may cost up to %d, over the bound of %d (assuming lists and maps of %d members and strings of %d characters): narrow it",
			est.Max, MaxCost, SizeHint, StringSizeHint)
	}
	// Without a comprehension a rule's cost grows with the sizes of the
	// strings it reads, which the body's limit bounds: only a rule with one
	// pays for tracking its cost as it runs (a third of the evaluation).
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	comprehension = hasComprehension(ast)
	if comprehension {
		opts = append(opts, cel.CostLimit(MaxCost))
	}
	prg, err = e.Program(ast, opts...)
	if err != nil {
		return nil, false, "does not compile: " + err.Error()
	}
	return prg, comprehension, ""
}

// hasComprehension reports whether the rule has a comprehension (all,
// exists, exists_one, map, filter).
func hasComprehension(a *cel.Ast) bool {
	found := false
	celast.PostOrderVisit(a.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		found = found || e.Kind() == celast.ComprehensionKind
	}))
	return found
}

// sortedKeys returns m's keys in order, so that parameters are set in an
// order that does not change between runs.
func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Cache keeps compiled policies by their spec, so that a reload compiles
// only what changed: each configuration's Cache holds its own policies and
// takes the unchanged ones from the previous configuration's (NewCache).
// Not safe for concurrent use: one configuration is built at a time.
type Cache struct {
	byKey map[string]*Policy
	prev  *Cache
}

// NewCache returns a Cache that takes compiled policies from prev (nil:
// none); what prev holds that the new configuration does not use is left
// to prev, and goes with it.
func NewCache(prev *Cache) *Cache { return &Cache{prev: prev} }

// Compile is the package's Compile, answered from c, or from the Cache c
// was made from, for a spec compiled before; a nil c compiles.
func (c *Cache) Compile(s Spec) (*Policy, []Problem) {
	if c == nil {
		return Compile(s)
	}
	k := s.key()
	if p := c.byKey[k]; p != nil {
		return p, nil
	}
	if c.prev != nil {
		if p := c.prev.byKey[k]; p != nil {
			c.keep(k, p)
			return p, nil
		}
	}
	p, probs := Compile(s)
	if p != nil {
		c.keep(k, p)
	}
	return p, probs
}

// Done ends the building of c: it lets go of the Cache it was made from,
// so that a chain of reloads does not keep every configuration's.
func (c *Cache) Done() { c.prev = nil }

// keep puts p in c under k.
func (c *Cache) keep(k string, p *Policy) {
	if c.byKey == nil {
		c.byKey = map[string]*Policy{}
	}
	c.byKey[k] = p
}

// key is a string that two specs share exactly when they are equal.
func (s *Spec) key() string {
	var b strings.Builder
	w := func(v ...string) {
		for _, x := range v {
			fmt.Fprintf(&b, "%d:%s", len(x), x)
		}
		b.WriteByte('|')
	}
	w(s.Name, s.Deny, s.Require, s.Message, s.Mode)
	w(s.Match.Endpoints...)
	w(s.Match.Brokers...)
	w(s.Match.Services...)
	w(s.Match.Plans...)
	for _, m := range []map[string]string{s.Defaults, s.Force} {
		for _, k := range sortedKeys(m) {
			w(k, m[k])
		}
	}
	return b.String()
}
