package proxy

import (
	"maps"

	"github.com/osb-gateway/osb-gateway/internal/policy"
)

// PolicyInfo is one policy as the console shows it: where it is written,
// what it matches and its rules (CEL sources; never a secret).
type PolicyInfo struct {
	// Name names the policy; Where is "top level", "tenant <t>" or
	// "route <prefix>".
	Name, Where string
	// Mode is enforce or report.
	Mode                                string
	Endpoints, Brokers, Services, Plans []string
	Deny, Require, Message              string
	Defaults, Force                     map[string]string
	// Denials is how many of the recent denials (PolicyDenials) are its.
	Denials int
}

// Policies returns every policy of the configuration, top-level ones
// first, then each tenant's and each of its routes'.
func (v *View) Policies() []PolicyInfo {
	g := v.sw.Load()
	counts := map[string]int{}
	if g.policy != nil {
		for _, d := range g.policy.Recent.Latest() {
			counts[d.Policy]++
		}
	}
	var out []PolicyInfo
	add := func(where string, specs []policy.Spec) {
		for _, s := range specs {
			mode := s.Mode
			if mode == "" {
				mode = "enforce"
			}
			out = append(out, PolicyInfo{Name: s.Name, Where: where, Mode: mode, Endpoints: s.Match.Endpoints,
				Brokers: s.Match.Brokers, Services: s.Match.Services, Plans: s.Match.Plans, Deny: s.Deny,
				Require: s.Require, Message: s.Message, Defaults: maps.Clone(s.Defaults), Force: maps.Clone(s.Force),
				Denials: counts[s.Name]})
		}
	}
	cfg := g.cfg
	add("top level", cfg.Policies)
	for _, t := range cfg.Tenants {
		add("tenant "+t.Name, t.Policies)
		for _, r := range t.Routes {
			add("route "+r.Prefix, r.Policies)
		}
	}
	return out
}

// PolicyDenials returns the latest calls the policies denied (or, in
// report mode, would have), newest first: at most the 100 latest, kept
// in memory across reloads, per replica.
func (v *View) PolicyDenials() []PolicyDenial {
	g := v.sw.Load()
	if g.policy == nil {
		return nil
	}
	return g.policy.Recent.Latest()
}
