package proxy

import "github.com/osb-gateway/osb-gateway/internal/audit"

// fillPolicyAudit sets what the policy stage recorded in s's findings on
// the audit record: the policy that denied the call, those in report
// mode that would have, and the parameters each policy set (names only,
// never values).
func fillPolicyAudit(rec *audit.Record, s *Scope) {
	for _, f := range s.Findings {
		if f.Direction != "policy" {
			continue
		}
		switch f.Rule {
		case rulePolicyDenied:
			rec.Policy = f.Code
		case rulePolicyReported:
			rec.PoliciesReported = append(rec.PoliciesReported, f.Code)
		case rulePolicyForced, rulePolicyDefaulted:
			action := "force"
			if f.Rule == rulePolicyDefaulted {
				action = "default"
			}
			rec.PolicyChanges = append(rec.PolicyChanges, audit.PolicyChange{Policy: f.Code, Parameter: f.Description, Action: action})
		}
	}
}
