package observe

import (
	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// fillPolicyAudit sets what the policy stage recorded in s's findings on
// the audit record: the policy that denied the call, those in report
// mode that would have, and the parameters each policy set (names only,
// never values).
func fillPolicyAudit(rec *audit.Record, s *core.Scope) {
	for _, f := range s.Findings {
		if f.Direction != "policy" {
			continue
		}
		switch f.Rule {
		case core.RulePolicyDenied:
			rec.Policy = f.Code
		case core.RulePolicyReported:
			rec.PoliciesReported = append(rec.PoliciesReported, f.Code)
		case core.RulePolicyForced, core.RulePolicyDefaulted:
			action := "force"
			if f.Rule == core.RulePolicyDefaulted {
				action = "default"
			}
			rec.PolicyChanges = append(rec.PolicyChanges, audit.PolicyChange{Policy: f.Code, Parameter: f.Description, Action: action})
		}
	}
}
