package audit

import "github.com/osb-gateway/osb-gateway/internal/jsonfast"

// appendPolicy appends the policy members of r (policy,
// policies_reported, policy_changes), each with its leading comma, as
// encoding/json writes them; nothing when they are empty.
func appendPolicy(dst []byte, r *Record) []byte {
	dst = appendOmitEmpty(dst, `,"policy":`, r.Policy)
	if len(r.PoliciesReported) > 0 {
		dst = append(dst, `,"policies_reported":[`...)
		for i, p := range r.PoliciesReported {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonfast.AppendString(dst, p)
		}
		dst = append(dst, ']')
	}
	if len(r.PolicyChanges) > 0 {
		dst = append(dst, `,"policy_changes":[`...)
		for i, c := range r.PolicyChanges {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"policy":`...)
			dst = jsonfast.AppendString(dst, c.Policy)
			dst = append(dst, `,"parameter":`...)
			dst = jsonfast.AppendString(dst, c.Parameter)
			dst = append(dst, `,"action":`...)
			dst = jsonfast.AppendString(dst, c.Action)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return dst
}
