package rules

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Violation is one broken rule in a request the platform sent or a response
// the broker gave. A gateway in enforce mode refuses the exchange with Reject;
// in report mode it records the violations and forwards the bytes unchanged.
//
// CheckRequest and CheckResponse return violations in a stable order: the
// order in which their rules run, which puts the shape of the body before
// its fields and the fields before the catalog.
type Violation struct {
	// Rule is the rule's stable id, such as "request.plan_id.required" or
	// "response.last_operation.state": lower case, dot-separated, never
	// reworded, so that it can label metrics and be matched in alerts.
	Rule string
	// Status is the HTTP status the gateway answers with when it enforces
	// the rule: 400, 422 for request rules; 502 for response rules, since a
	// broker answer that breaks the specification is a bad gateway answer.
	Status int
	// Code is the OSB error code of the refusal, such as
	// osb.CodeMaintenanceInfoConflict; empty for most rules, as the
	// specification has no code for them.
	Code string
	// Description says, for a person, what the rule expected and what came,
	// naming the field by its path (previous_values/plan_id).
	Description string
}

// Reject builds the one *osb.Error a gateway in enforce mode answers with:
// the status and code of the first violation and a description that lists
// every violation, joined with "; ". It returns nil for no violations. A
// gateway that refuses with the first violation alone passes vs[:1].
func Reject(vs []Violation) *osb.Error {
	switch len(vs) {
	case 0:
		return nil
	case 1:
		return &osb.Error{Status: vs[0].Status, Code: vs[0].Code, Description: vs[0].Description}
	}
	var b strings.Builder
	b.WriteString(strconv.Itoa(len(vs)))
	b.WriteString(" problems: ")
	for i, v := range vs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(v.Description)
	}
	return &osb.Error{Status: vs[0].Status, Code: vs[0].Code, Description: b.String()}
}

// violationList collects the violations of one check.
type violationList []Violation

// add appends a violation with status http.StatusBadRequest and no code.
func (vs *violationList) add(rule, description string) {
	*vs = append(*vs, Violation{Rule: rule, Status: http.StatusBadRequest, Description: description})
}

// addError appends a violation that carries the status, code and
// description of an *osb.Error another part of the rules produced (the
// catalog index, a parameter schema). Other errors become a 400 with the
// error's text.
func (vs *violationList) addError(rule string, err error) {
	e := osb.AsError(err)
	if e.Status == http.StatusInternalServerError && e.Err != nil {
		e = &osb.Error{Status: http.StatusBadRequest, Description: err.Error()}
	}
	*vs = append(*vs, Violation{Rule: rule, Status: e.Status, Code: e.Code, Description: e.Description})
}

// ruleID turns a field path ("previous_values/plan_id") and a check
// ("type") into a rule id ("request.previous_values.plan_id.type").
func ruleID(side, path, check string) string {
	return side + "." + strings.ReplaceAll(path, "/", ".") + "." + check
}

// valueKindOf names the JSON type of a raw value by its first byte, for
// descriptions: "a string", "an object", "null".
func valueKindOf(raw []byte) string {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return "an object"
		case '[':
			return "an array"
		case '"':
			return "a string"
		case 't', 'f':
			return "a boolean"
		case 'n':
			return "null"
		default:
			return "a number"
		}
	}
	return "an empty body"
}

// maxQuoted is how much of a broker's or platform's string a description
// repeats.
const maxQuoted = 100

// quoteCut quotes s for a description, cut to maxQuoted bytes.
func quoteCut(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "…"
	}
	return strconv.Quote(s)
}
