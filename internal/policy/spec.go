// Package policy is the engine of the gateway's policies (gateway.yaml
// policies:, tenants[].policies, tenants[].routes[].policies): it compiles
// each policy's CEL rules against the typed variables a call offers
// (vars.go), refuses at load what does not compile, names an unknown
// variable or may cost more than MaxCost, and evaluates the compiled
// programs against one call (Input) into a Verdict: the policy that denies
// it, the would-be denials of policies in report mode, and the parameters
// the policies' defaults and force set. It knows no HTTP and imports
// nothing under proxy/; the proxy's policy stage is a thin adapter over it.
package policy

// Spec is one policy as gateway.yaml writes it.
type Spec struct {
	// Name names the policy in refusals, audit records, metrics and logs;
	// required, unique among the policies one call may meet.
	Name string `yaml:"name" json:"name"`
	// Match selects the calls the policy applies to; zero value: every
	// provision, update, deprovision, bind and unbind.
	Match Match `yaml:"match" json:"match"`
	// Deny is a CEL expression: the call is refused when it is true.
	Deny string `yaml:"deny" json:"deny,omitempty"`
	// Require is a CEL expression: the call is refused when it is false.
	Require string `yaml:"require" json:"require,omitempty"`
	// Message is a CEL string expression saying why a call is refused
	// (it may quote the offending value); zero value: the rule's source.
	Message string `yaml:"message" json:"message,omitempty"`
	// Mode is ModeEnforce (refuse) or ModeReport (log and count what would
	// be refused or set, and let the call on unchanged); zero value:
	// enforce.
	Mode string `yaml:"mode" json:"mode,omitempty"`
	// Defaults maps a parameter name to a CEL expression whose value the
	// parameter gets when the platform sent no such parameter.
	Defaults map[string]string `yaml:"defaults" json:"defaults,omitempty"`
	// Force maps a parameter name to a CEL expression whose value the
	// parameter gets whatever the platform sent.
	Force map[string]string `yaml:"force" json:"force,omitempty"`
}

// Match selects calls. Each list left empty matches anything; a call must
// match every list given.
type Match struct {
	// Endpoints are among provision, update, deprovision, bind, unbind.
	Endpoints []string `yaml:"endpoints" json:"endpoints,omitempty"`
	// Brokers are broker names (useful at the top level, where a policy
	// meets every route).
	Brokers []string `yaml:"brokers" json:"brokers,omitempty"`
	// Services and Plans name the call's service and plan by catalog name
	// or id.
	Services []string `yaml:"services" json:"services,omitempty"`
	Plans    []string `yaml:"plans" json:"plans,omitempty"`
}

// Modes of a policy (Spec.Mode).
const (
	ModeEnforce = "enforce"
	ModeReport  = "report"
)

// Endpoints a policy may match: the calls that change something.
var Endpoints = []string{"provision", "update", "deprovision", "bind", "unbind"}

// Report reports whether the policy only reports.
func (s *Spec) Report() bool { return s.Mode == ModeReport }

// matches reports whether the call in in is one m selects. Services and
// plans match by id or, when the catalog named them, by name.
func (m *Match) matches(in *Input) bool {
	return anyOf(m.Endpoints, in.Endpoint, "") && anyOf(m.Brokers, in.Broker, "") &&
		anyOf(m.Services, in.Service.ID, in.Service.Name) && anyOf(m.Plans, in.Plan.ID, in.Plan.Name)
}

// anyOf reports whether list is empty or holds a or a non-empty b.
func anyOf(list []string, a, b string) bool {
	if len(list) == 0 {
		return true
	}
	for _, s := range list {
		if s != "" && (s == a || s == b) {
			return true
		}
	}
	return false
}
