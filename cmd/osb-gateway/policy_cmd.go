package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/policy"
)

const policyUsage = `usage: osb-gateway policy test -config F -request FILE

Evaluates the policies a recorded call meets (the top-level ones, its
tenant's and its route's) and prints each rule's verdict, the decision and
the parameters the policies set. FILE is a JSON request file (see
docs/policies.md) or an audit record; an audit record holds no parameter
values, so rules on them see none. Nothing is sent anywhere: service and
plan names and the instance's record come from the file.

exit codes: 0 let through, 1 denied (or the configuration has problems),
2 usage or a file that cannot be read.
`

// policyRequest is the request file of "policy test".
type policyRequest struct {
	Tenant, Broker, Endpoint string
	InstanceID               string `json:"instance_id"`
	BindingID                string `json:"binding_id"`
	Username                 string
	// OriginatingIdentity is the header's value, "<platform> <base64>".
	OriginatingIdentity string          `json:"originating_identity"`
	Body                json.RawMessage // the OSB request body
	Service, Plan       *offeringJSON
	Instance            *struct {
		Tenant        string
		Service, Plan *offeringJSON
		Context       json.RawMessage
		Created       time.Time
	}
	Now time.Time
	// Outcome and RequestID mark an audit record.
	Outcome   string
	RequestID string `json:"request_id"`
}

type offeringJSON struct {
	ID, Name string
	Metadata json.RawMessage
}

func (o *offeringJSON) offering() policy.Offering {
	if o == nil {
		return policy.Offering{}
	}
	return policy.Offering{ID: o.ID, Name: o.Name, Metadata: o.Metadata}
}

// runPolicy runs "osb-gateway policy test".
func runPolicy(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "test" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "help" || args[0] == "--help") {
			fmt.Fprint(stdout, policyUsage)
			return exitOK
		}
		fmt.Fprint(stderr, policyUsage)
		return exitUsage
	}
	fs := newFlagSet("policy test", policyUsage, stderr)
	path := fs.String("config", "gateway.yaml", "the configuration file")
	reqPath := fs.String("request", "", "the request file or audit record (JSON)")
	if code, ok := parseFlags(fs, args[1:], false); !ok {
		return code
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return loadExitCode(err)
	}
	raw, err := os.ReadFile(*reqPath)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway policy test: %v\n", err)
		return exitUsage
	}
	in, specs, err := policyInput(cfg, raw)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway policy test: %s: %v\n", *reqPath, err)
		return exitUsage
	}
	var list []*policy.Policy
	for _, s := range specs {
		p, probs := policy.Compile(s)
		if len(probs) > 0 { // config.Load refused these already
			fmt.Fprintf(stderr, "policy %q: %s: %s\n", s.Name, probs[0].Field, probs[0].Message)
			return exitFailed
		}
		list = append(list, p)
	}
	v := policy.NewSet(list).Evaluate(in, true)
	printVerdict(stdout, v)
	if v.Denied != nil {
		return exitFailed
	}
	return exitOK
}

// policyInput reads a request file or an audit record into what the
// policies see, and finds the policies its route meets.
func policyInput(cfg *config.Config, raw []byte) (*policy.Input, []policy.Spec, error) {
	var r policyRequest
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, nil, err
	}
	in := &policy.Input{Endpoint: r.Endpoint, Broker: r.Broker, Tenant: r.Tenant, Username: r.Username, InstanceID: r.InstanceID,
		BindingID: r.BindingID, Identity: r.OriginatingIdentity, Body: r.Body, Service: r.Service.offering(), Plan: r.Plan.offering(), Now: r.Now}
	if r.RequestID != "" && r.Outcome != "" { // an audit record
		var rec audit.Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, nil, err
		}
		in.Now = rec.Time
		in.Service.ID, in.Plan.ID = rec.ServiceID, rec.PlanID
		in.Body, _ = json.Marshal(map[string]any{"service_id": rec.ServiceID, "plan_id": rec.PlanID})
		if id := rec.Identity; id != nil {
			v, _ := json.Marshal(map[string]string{"user_id": id.UserID, "username": id.Username})
			in.Identity = id.Platform + " " + base64.StdEncoding.EncodeToString(v)
		}
	}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	if r.Instance != nil {
		rec := &policy.Instance{Tenant: r.Instance.Tenant, Service: r.Instance.Service.offering(), Plan: r.Instance.Plan.offering(),
			Context: r.Instance.Context, Created: r.Instance.Created}
		in.Instance = func() *policy.Instance { return rec }
	}
	t := cfg.Tenant(in.Tenant)
	if t == nil {
		return nil, nil, fmt.Errorf("tenant %q is not in the configuration", in.Tenant)
	}
	for i := range t.Routes {
		if t.Routes[i].Broker == in.Broker {
			return in, cfg.PoliciesOf(t, &t.Routes[i]), nil
		}
	}
	return nil, nil, fmt.Errorf("tenant %q has no route to broker %q", in.Tenant, in.Broker)
}

// printVerdict prints each rule's verdict, then the decision.
func printVerdict(w io.Writer, v policy.Verdict) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tRULE\tVERDICT")
	for _, r := range v.Rules {
		verdict := r.Value
		switch {
		case !r.Matched:
			verdict = "not matched"
		case r.Err != "":
			verdict = "error: " + r.Err
		case r.Rule == "deny" && r.Value == "true", r.Rule == "require" && r.Value == "false":
			verdict = r.Value + " (refuses)"
		case r.Rule == "deny" || r.Rule == "require":
			verdict = r.Value + " (passes)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Policy, r.Rule, verdict)
	}
	_ = tw.Flush()
	for _, d := range v.Reported {
		fmt.Fprintf(w, "report: policy %q would deny: %s\n", d.Policy, d.Message)
	}
	if v.Denied != nil {
		fmt.Fprintf(w, "denied by policy %q: %s\n", v.Denied.Policy, v.Denied.Message)
		return
	}
	fmt.Fprintln(w, "let through")
	if v.Parameters != nil {
		fmt.Fprintf(w, "parameters sent on: %s\n", v.Parameters)
	}
}
