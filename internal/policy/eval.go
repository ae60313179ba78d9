package policy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"google.golang.org/protobuf/types/known/structpb"
)

// Set is the compiled policies one route's calls meet, in order: the
// top-level ones, the tenant's, the route's. Immutable and safe for
// concurrent use.
type Set struct {
	list []*Policy
	// fast holds, by the bitmask of the policies a call matched, one
	// program that is false exactly when none of their deny and require
	// rules refuses (fast.go); a call for which it is false skips the
	// rules one by one.
	fast fastPrograms
}

// NewSet returns the set of ps, in their order; nil for none.
func NewSet(ps []*Policy) *Set {
	if len(ps) == 0 {
		return nil
	}
	return &Set{list: ps}
}

// Policies returns the set's policies; the caller must not change them.
func (s *Set) Policies() []*Policy {
	if s == nil {
		return nil
	}
	return s.list
}

// Denial is a policy's refusal of a call.
type Denial struct {
	// Policy names the policy; Message is its message's value (or, when
	// the rule or message could not be evaluated, why).
	Policy, Message string
	// Report is set for a policy in report mode: the call went on.
	Report bool
}

// Change is a parameter a policy set.
type Change struct {
	// Policy names the policy; Parameter the parameter it set.
	Policy, Parameter string
	// Action is "force" or "default".
	Action string
	// Report is set for a policy in report mode: the parameter was not set.
	Report bool
}

// RuleVerdict is one rule's outcome, for `osb-gateway policy test`.
type RuleVerdict struct {
	Policy, Rule string // Rule: "deny", "require", "defaults.<p>", "force.<p>"
	// Matched is false when the policy's match left the call out (the
	// rule was not evaluated).
	Matched bool
	// Value is what the rule evaluated to (JSON), Err why it failed.
	Value string
	Err   string
}

// Verdict is what the policies decided of one call.
type Verdict struct {
	// Denied is the first denial by a policy that enforces, nil when none
	// denies.
	Denied *Denial
	// Reported are the denials of policies in report mode.
	Reported []Denial
	// Changes are the parameters set (or, in report mode, that would
	// have been), in the order they were set.
	Changes []Change
	// Parameters are the effective parameters (JSON) when a policy that
	// enforces changed them, nil when none did.
	Parameters json.RawMessage
	// Rules is every rule's outcome, when Evaluate was asked to explain.
	Rules []RuleVerdict
}

// Evaluate runs the set's policies that match in against it. Denials are
// decided on the request as the platform sent it; then defaults (the first
// policy to default a parameter the platform did not send wins) and force
// (the last policy to force a parameter wins) set the parameters, unless
// the call is denied. A rule that fails to evaluate denies (its policy in
// report mode reports it). explain fills Verdict.Rules and evaluates every
// rule even after a denial.
func (s *Set) Evaluate(in *Input, explain bool) Verdict {
	var v Verdict
	if s == nil {
		return v
	}
	a := &activation{in: in}
	var buf [32]*Policy
	matched := buf[:0]
	var mask uint64
	for i, p := range s.list {
		if !p.Match.matches(in) {
			if explain {
				for _, r := range p.rules() {
					v.Rules = append(v.Rules, RuleVerdict{Policy: p.Name, Rule: r})
				}
			}
			continue
		}
		matched = append(matched, p)
		if i < 64 {
			mask |= 1 << i
		}
	}
	if explain || len(s.list) > 64 || !s.fast.passes(mask, matched, a) {
		s.checkEach(a, matched, &v, explain)
	}
	if v.Denied != nil && !explain {
		return v
	}
	setParameters(a, matched, &v, explain)
	return v
}

// checkEach evaluates the matched policies' deny and require rules one by
// one.
func (s *Set) checkEach(a *activation, matched []*Policy, v *Verdict, explain bool) {
	for _, p := range matched {
		if v.Denied != nil && !explain {
			return
		}
		if d := p.check(a, v, explain); d != nil {
			if d.Report {
				v.Reported = append(v.Reported, *d)
			} else if v.Denied == nil {
				v.Denied = d
			}
		}
	}
}

// rules names the policy's rules, for an explanation.
func (p *Policy) rules() []string {
	var out []string
	if p.deny != nil {
		out = append(out, "deny")
	}
	if p.require != nil {
		out = append(out, "require")
	}
	for _, d := range p.defaults {
		out = append(out, "defaults."+d.name)
	}
	for _, f := range p.force {
		out = append(out, "force."+f.name)
	}
	return out
}

// check evaluates the policy's deny and require rules; it returns its
// denial or nil.
func (p *Policy) check(a *activation, v *Verdict, explain bool) *Denial {
	var denied *Denial
	for _, r := range [...]struct {
		name   string
		prg    *program
		denyIf bool
	}{{"deny", p.deny, true}, {"require", p.require, false}} {
		if r.prg == nil {
			continue
		}
		out, err := r.prg.eval(a)
		b, isBool := out.(types.Bool)
		if explain {
			v.Rules = append(v.Rules, verdictOf(p.Name, r.name, true, out, err))
		}
		switch {
		case err != nil:
			denied = &Denial{Policy: p.Name, Message: fmt.Sprintf("its %s rule could not be evaluated: %v", r.name, err)}
		case !isBool:
			denied = &Denial{Policy: p.Name, Message: fmt.Sprintf("its %s rule gave %s, not a bool", r.name, out.Type())}
		case bool(b) == r.denyIf:
			denied = &Denial{Policy: p.Name, Message: p.explain(a, r.prg.src)}
		}
		if denied != nil {
			denied.Report = p.Report()
			return denied
		}
	}
	return nil
}

// explain is the policy's message for a denial: its message expression's
// value, else the rule's source.
func (p *Policy) explain(a *activation, src string) string {
	if p.message == nil {
		return "refused by " + src
	}
	out, err := p.message.eval(a)
	if err != nil {
		return fmt.Sprintf("refused by %s (its message could not be evaluated: %v)", src, err)
	}
	if s, ok := out.(types.String); ok {
		if len(s) > MaxMessage {
			return strings.ToValidUTF8(string(s[:MaxMessage]), "") + "…"
		}
		return string(s)
	}
	return fmt.Sprintf("refused by %s", src)
}

// MaxMessage caps a policy's message, in bytes: a message quoting a large
// value does not make a large refusal.
const MaxMessage = 1024

// eval runs the program; a CEL error value is returned as an error.
func (pr *program) eval(a *activation) (ref.Val, error) {
	out, _, err := pr.prg.Eval(a)
	if err != nil {
		return out, err
	}
	if types.IsError(out) {
		return out, out.(*types.Err)
	}
	return out, nil
}

// verdictOf is one rule's outcome for an explanation.
func verdictOf(pol, rule string, matched bool, out ref.Val, err error) RuleVerdict {
	rv := RuleVerdict{Policy: pol, Rule: rule, Matched: matched}
	if err != nil {
		rv.Err = err.Error()
		return rv
	}
	if j, err := toJSON(out); err == nil {
		rv.Value = string(j)
	} else {
		rv.Err = err.Error()
	}
	return rv
}

// jsonValue is the Go type CEL values convert to for JSON.
var jsonValue = reflect.TypeFor[*structpb.Value]()

// toJSON encodes a CEL value as JSON.
func toJSON(out ref.Val) ([]byte, error) {
	if ts, ok := out.(types.Timestamp); ok {
		return json.Marshal(ts.Time)
	}
	nv, err := out.ConvertToNative(jsonValue)
	if err != nil {
		return nil, fmt.Errorf("a value of type %s has no JSON form", out.Type())
	}
	return json.Marshal(nv.(*structpb.Value).AsInterface())
}
