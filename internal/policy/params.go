package policy

import (
	"encoding/json"
	"fmt"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/traits"
)

// setParameters applies the matched policies' defaults, then their force,
// to the request's parameters (see Evaluate), recording each change in v
// and the effective parameters in v.Parameters. A rule that fails to
// evaluate denies the call (or, in report mode, reports it).
func setParameters(a *activation, matched []*Policy, v *Verdict, explain bool) {
	sets := false
	for _, p := range matched {
		sets = sets || len(p.defaults)+len(p.force) > 0
	}
	if !sets {
		return
	}
	sent := member(a.request(), "parameters").(traits.Mapper)
	set := map[string]json.RawMessage{}
	var order []string
	apply := func(p *Policy, pr param, action string) {
		if action == "default" {
			if _, ok := sent.Find(types.String(pr.name)); ok {
				return
			}
			if _, ok := set[pr.name]; ok && !p.Report() {
				return
			}
		}
		out, err := pr.prg.eval(a)
		if explain {
			rule := "force." + pr.name
			if action == "default" {
				rule = "defaults." + pr.name
			}
			v.Rules = append(v.Rules, verdictOf(p.Name, rule, true, out, err))
		}
		var j []byte
		if err == nil {
			j, err = toJSON(out)
		}
		if err != nil {
			d := Denial{Policy: p.Name, Report: p.Report(),
				Message: fmt.Sprintf("its %s of parameter %q could not be evaluated: %v", action, pr.name, err)}
			if d.Report {
				v.Reported = append(v.Reported, d)
			} else if v.Denied == nil {
				v.Denied = &d
			}
			return
		}
		v.Changes = append(v.Changes, Change{Policy: p.Name, Parameter: pr.name, Action: action, Report: p.Report()})
		if p.Report() {
			return
		}
		if _, ok := set[pr.name]; !ok {
			order = append(order, pr.name)
		}
		set[pr.name] = j
	}
	for _, p := range matched {
		for _, pr := range p.defaults {
			apply(p, pr, "default")
		}
	}
	for _, p := range matched {
		for _, pr := range p.force {
			apply(p, pr, "force")
		}
	}
	if len(set) == 0 || v.Denied != nil {
		return
	}
	params := sentParameters(a.in.Body)
	for _, k := range order {
		params[k] = set[k]
	}
	v.Parameters, _ = json.Marshal(params) // RawMessages that are valid JSON: no error
}

// sentParameters returns the body's parameters member as raw members, an
// empty map when it has none (or it is not an object).
func sentParameters(body []byte) map[string]json.RawMessage {
	var top struct {
		Parameters map[string]json.RawMessage `json:"parameters"`
	}
	if json.Unmarshal(body, &top) != nil || top.Parameters == nil {
		return map[string]json.RawMessage{}
	}
	return top.Parameters
}

// WithParameters returns body (a JSON object, or empty) with its
// parameters member replaced by params.
func WithParameters(body []byte, params json.RawMessage) ([]byte, error) {
	top := map[string]json.RawMessage{}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &top); err != nil {
			return nil, fmt.Errorf("the request body is not a JSON object: %w", err)
		}
		if top == nil {
			top = map[string]json.RawMessage{}
		}
	}
	top["parameters"] = params
	return json.Marshal(top)
}
