package rules

import "encoding/json"

// RequestIDs reads the service_id and plan_id of a provision, update or
// bind body that CheckRequest did not read (request validation off), for
// a decision that must see the ids a broker would act on, such as a
// tenant's catalog filter. Keys match as encoding/json matches struct
// fields, without regard to case ("PLAN_ID" is plan_id), since a broker
// written in Go reads them so; values that are not strings, and bodies
// that are not JSON objects, read as "".
func RequestIDs(body []byte) (serviceID, planID string) {
	var ids struct {
		ServiceID json.RawMessage `json:"service_id"`
		PlanID    json.RawMessage `json:"plan_id"`
	}
	if json.Unmarshal(body, &ids) != nil {
		return "", ""
	}
	_ = json.Unmarshal(ids.ServiceID, &serviceID)
	_ = json.Unmarshal(ids.PlanID, &planID)
	return serviceID, planID
}
