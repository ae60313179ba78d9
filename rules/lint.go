package rules

import (
	"fmt"
	"strconv"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Severity ranks a catalog Finding. The zero value is no severity.
type Severity uint8

// Severities, least severe first.
const (
	// SeverityWarning is a departure from a SHOULD or RECOMMENDED of the
	// specification: platforms accept the catalog, but something may go
	// wrong or look wrong.
	SeverityWarning Severity = iota + 1
	// SeverityError is a breach of a MUST of the specification, or something
	// Cloud Controller refuses or fails to store (it limits ids and names to
	// 255 characters, service descriptions to 10,000 and tags to 2,048).
	SeverityError
)

// String returns "warning" or "error" ("unknown" for other values).
func (s Severity) String() string {
	switch s {
	case SeverityWarning:
		return "warning"
	case SeverityError:
		return "error"
	}
	return "unknown"
}

// MarshalText implements encoding.TextMarshaler, so that JSON shows the
// severity by name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Finding is one problem lint found in a catalog.
type Finding struct {
	// Path locates the offending value in the catalog, such as
	// "services[0].plans[2].name" or
	// "services[1].plans[0].schemas.service_instance.create.parameters".
	Path string `json:"path"`
	// Severity says whether the catalog breaks the specification (Error) or
	// only a recommendation (Warning).
	Severity Severity `json:"severity"`
	// Message says what is wrong, for a person.
	Message string `json:"message"`
}

// String formats the finding as "path: severity: message".
func (f Finding) String() string {
	return f.Path + ": " + f.Severity.String() + ": " + f.Message
}

// linter collects findings while it walks a catalog in document order, so
// findings come out sorted by path: services in order, and within a service
// its own fields before its plans.
type linter struct {
	findings []Finding
	schemas  *schemaSet
	slots    []schemaSlot
	// seen maps a uniqueness scope, such as "service.id" or
	// "plan.name@services[0]", to the values met so far and the path each
	// was first met at.
	seen map[string]map[string]string
}

// add records a finding.
func (l *linter) add(path string, sev Severity, format string, args ...any) {
	l.findings = append(l.findings, Finding{Path: path, Severity: sev, Message: fmt.Sprintf(format, args...)})
}

// schemaSlot is a plan's use of a parameter schema: where the findings
// from compiling the schema go among the compile-free ones.
type schemaSlot struct {
	at   int // index in the compile-free findings
	i, j int // plan j of service i
	k    SchemaKind
	res  *schemaResult
}

// path is the catalog path of the slot's schema.
func (s *schemaSlot) path() string {
	return schemaPath("services["+strconv.Itoa(s.i)+"].plans["+strconv.Itoa(s.j)+"]", s.k)
}

// schemaPath is the path of a plan's schema of kind k; planAt is the plan's.
func schemaPath(planAt string, k SchemaKind) string {
	return planAt + ".schemas." + k.String() + ".parameters"
}

// lintCatalog checks a decoded catalog, without compiling its parameter
// schemas: schemas holds their compile-free problems. It returns the
// findings, and where each plan's compile findings go among them.
func lintCatalog(w *wireCatalog, schemas *schemaSet) ([]Finding, []schemaSlot) {
	l := &linter{schemas: schemas, seen: map[string]map[string]string{}}
	if w.Services == nil {
		l.add("services", SeverityError, `missing; the specification requires a "services" array`)
		return l.findings, nil
	}
	if len(w.Services) == 0 {
		l.add("services", SeverityWarning, "empty: the broker offers nothing, and Cloud Controller refuses to register a broker without services")
	}
	for i := range w.Services {
		l.service(i, &w.Services[i])
	}
	return l.findings, l.slots
}

// withCompileFindings merges the findings from compiling each slot's schema
// into findings, at their place in catalog order. It compiles the schemas
// not compiled yet, one at a time: call schemaSet.compileAll first.
func withCompileFindings(findings []Finding, slots []schemaSlot) []Finding {
	var out []Finding
	done := 0
	for _, s := range slots {
		ps := s.res.compile().compileProblems
		if len(ps) == 0 {
			continue
		}
		out = append(out, findings[done:s.at]...)
		done = s.at
		path := s.path()
		for _, p := range ps {
			out = append(out, Finding{Path: path, Severity: p.severity, Message: p.message})
		}
	}
	return append(out, findings[done:]...)
}

// service checks services[i] and its plans.
func (l *linter) service(i int, ws *wireService) {
	at := "services[" + strconv.Itoa(i) + "]"
	s := &ws.Service
	lintTexts(l, at, "service", "", lintServiceTexts, s)
	for _, rule := range lintServiceRules {
		rule(l, at, ws)
	}
	for j := range s.Plans {
		l.plan(at, i, j, s, &s.Plans[j])
	}
}

// plan checks plan j of service i, s, which lives at serviceAt.
func (l *linter) plan(serviceAt string, i, j int, s *osb.Service, p *osb.Plan) {
	at := serviceAt + ".plans[" + strconv.Itoa(j) + "]"
	lintTexts(l, at, "plan", serviceAt, lintPlanTexts, p)
	for _, rule := range lintPlanRules {
		rule(l, at, s, p)
	}
	for k := range SchemaKind(numSchemaKinds) {
		res := l.schemas.result(i, j, k)
		if res == nil {
			continue
		}
		for _, pr := range res.problems {
			l.add(schemaPath(at, k), pr.severity, "%s", pr.message)
		}
		l.slots = append(l.slots, schemaSlot{at: len(l.findings), i: i, j: j, k: k, res: res})
	}
}
