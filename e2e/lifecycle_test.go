package e2e

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// brokerCase is one route through the gateway to one broker, and what the
// platform should find there.
type brokerCase struct {
	name       string
	prefix     string // route prefix
	user, pass string // tenant credentials
	broker     string // broker name in gatewayYAML
	version    osb.APIVersion

	// sentVersion is the X-Broker-API-Version the broker must receive:
	// the client's, capped at the broker's api_version.max.
	sentVersion            string
	brokerUser, brokerPass string

	serviceID, syncPlan, asyncPlan string
	// plans lists the catalog as "<service>/<plan> <plan id>".
	plans []string
	// modern brokers and clients have GET instance, GET binding and
	// asynchronous bindings (OSB 2.14); the others get the 2.8 subset.
	modern bool
	// pollDelay is what the client makes of the broker's Retry-After on an
	// "in progress" answer (nil: the broker sends none).
	pollDelay *time.Duration
	// deleteEnd is how polling a finished asynchronous deletion ends:
	// "succeeded", or gone when the broker answers 410.
	deleteEnd string
}

const gone = "410 Gone"

var oneSecond = time.Second

var (
	samplePlans = []string{
		samplebroker.ServiceName + "/" + samplebroker.PlanSyncName + " " + samplebroker.PlanSyncID,
		samplebroker.ServiceName + "/" + samplebroker.PlanAsyncName + " " + samplebroker.PlanAsyncID,
		samplebroker.NoBindServiceName + "/" + samplebroker.NoBindPlanName + " " + samplebroker.NoBindPlanID,
	}
	apiPlans = []string{
		apiServiceName + "/" + apiPlanSyncName + " " + apiPlanSyncID,
		apiServiceName + "/" + apiPlanAsyncName + " " + apiPlanAsyncID,
	}
)

// brokerCases are the five routes of gatewayYAML: each broker through the
// cf-prod tenant, and the two modern ones through cf-dev as well.
var brokerCases = []brokerCase{
	{
		name: "sample via cf-prod", prefix: prodSample, user: prodUser, pass: prodPass, broker: "sample",
		version: osb.Version2_14(), sentVersion: "2.14", brokerUser: sampleUser, brokerPass: samplePass,
		serviceID: samplebroker.ServiceID, syncPlan: samplebroker.PlanSyncID, asyncPlan: samplebroker.PlanAsyncID,
		plans: samplePlans, modern: true, pollDelay: &oneSecond, deleteEnd: gone,
	},
	{
		name: "brokerapi via cf-prod", prefix: prodAPI, user: prodUser, pass: prodPass, broker: "brokerapi",
		version: osb.Version2_14(), sentVersion: "2.14", brokerUser: apiUser, brokerPass: apiPass,
		serviceID: apiServiceID, syncPlan: apiPlanSyncID, asyncPlan: apiPlanAsyncID,
		plans: apiPlans, modern: true, deleteEnd: string(osb.StateSucceeded),
	},
	{
		name: "legacy sample via cf-prod", prefix: prodLegacy, user: prodUser, pass: prodPass, broker: "legacy",
		version: osb.Version2_11(), sentVersion: "2.8", brokerUser: legacyUser, brokerPass: legacyPass,
		serviceID: samplebroker.ServiceID, syncPlan: samplebroker.PlanSyncID, asyncPlan: samplebroker.PlanAsyncID,
		plans: samplePlans, deleteEnd: gone,
	},
	{
		name: "sample via cf-dev custom prefix", prefix: devSample, user: devUser, pass: devPass, broker: "sample",
		version: osb.LatestAPIVersion(), sentVersion: "2.14", brokerUser: sampleUser, brokerPass: samplePass,
		serviceID: samplebroker.ServiceID, syncPlan: samplebroker.PlanSyncID, asyncPlan: samplebroker.PlanAsyncID,
		plans: samplePlans, modern: true, pollDelay: &oneSecond, deleteEnd: gone,
	},
	{
		name: "brokerapi via cf-dev", prefix: devAPI, user: devUser, pass: devPass, broker: "brokerapi",
		version: osb.LatestAPIVersion(), sentVersion: "2.14", brokerUser: apiUser, brokerPass: apiPass,
		serviceID: apiServiceID, syncPlan: apiPlanSyncID, asyncPlan: apiPlanAsyncID,
		plans: apiPlans, modern: true, deleteEnd: string(osb.StateSucceeded),
	},
}

// TestLifecycle walks every broker through catalog, provision, update, bind,
// unbind and deprovision, synchronously and asynchronously, with the real OSB
// client through the gateway, and then checks that the broker saw every
// call with its own credentials and the negotiated version, and that every
// answer reached the platform byte for byte.
func TestLifecycle(t *testing.T) {
	for _, tc := range brokerCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			l := &lifecycle{brokerCase: tc, e: e, c: e.client(t, tc.prefix, tc.version, tc.user, tc.pass), dashboards: map[string]string{}}
			for _, s := range l.steps() {
				if s.modernOnly && !tc.modern {
					continue
				}
				if !t.Run(s.name, s.run) {
					return // later steps build on this one
				}
			}
		})
	}
}

// Identifiers the lifecycle uses.
const (
	orgGUID        = "org-guid-1"
	spaceGUID      = "space-guid-1"
	appGUID        = "app-guid-1"
	otherAppGUID   = "app-guid-2"
	syncInstance   = "instance-sync"
	asyncInstance  = "instance-async"
	syncBinding    = "binding-sync"
	asyncBinding   = "binding-async"
	inProgress     = string(osb.StateInProgress)
	succeeded      = string(osb.StateSucceeded)
	inProgressRuns = int((asyncDelay + pollStep - 1) / pollStep) // polls before an operation is due
)

var cfContext = map[string]any{"platform": "cloudfoundry", "organization_guid": orgGUID, "space_guid": spaceGUID}

// lifecycle is the state one brokerCase builds up step by step.
type lifecycle struct {
	brokerCase
	e *env
	c osb.Client

	dashboards map[string]string // by instance id, from provision
	syncCreds  map[string]any
}

type step struct {
	name       string
	modernOnly bool
	run        func(t *testing.T)
}

func (l *lifecycle) steps() []step {
	return []step{
		{name: "catalog", run: l.catalog},
		{name: "provision sync", run: l.provisionSync},
		{name: "provision sync again identical", run: l.provisionSyncIdentical},
		{name: "provision sync again conflicting", run: l.provisionSyncConflicting},
		{name: "get instance", modernOnly: true, run: l.getInstance(syncInstance, l.syncPlan, map[string]any{"size": "small"})},
		{name: "client refuses get instance below 2.14", run: l.getInstanceRefusedByClient},
		{name: "update sync", run: l.updateSync},
		{name: "get instance after update", modernOnly: true, run: l.getInstance(syncInstance, l.syncPlan, map[string]any{"size": "medium"})},
		{name: "provision async", run: l.provisionAsync},
		{name: "provision async again while done", run: l.provisionAsyncIdentical},
		{name: "update async", run: l.updateAsync},
		{name: "get instance after async update", modernOnly: true, run: l.getInstance(asyncInstance, l.asyncPlan, map[string]any{"tier": "gold"})},
		{name: "bind sync", run: l.bindSync},
		{name: "bind sync again identical", run: l.bindSyncIdentical},
		{name: "bind sync again conflicting", run: l.bindSyncConflicting},
		{name: "get binding", modernOnly: true, run: l.getBinding},
		{name: "bind async instance", run: l.bindAsyncInstance},
		{name: "unbind sync", run: l.unbindSync},
		{name: "unbind sync again", run: l.unbindSyncAgain},
		{name: "get binding after unbind", modernOnly: true, run: l.getBindingGone},
		{name: "unbind async instance", run: l.unbindAsyncInstance},
		{name: "deprovision sync", run: l.deprovisionSync},
		{name: "deprovision sync again", run: l.deprovisionAgain(syncInstance, l.syncPlan)},
		{name: "deprovision async", run: l.deprovisionAsync},
		{name: "deprovision async again", run: l.deprovisionAgain(asyncInstance, l.asyncPlan)},
		{name: "get instance after deprovision", modernOnly: true, run: l.getInstanceGone},
		{name: "wire", run: l.wire},
	}
}

func (l *lifecycle) catalog(t *testing.T) {
	got, err := l.c.GetCatalog()
	if err != nil {
		t.Fatalf("GetCatalog: %v", err)
	}
	l.e.wantStatus(t, http.StatusOK)
	served := l.e.brokers[l.broker].last(t)
	if platform := l.e.gateway.last(t); platform.Body != served.Body {
		t.Errorf("catalog changed on the way:\nbroker sent  %s\nplatform got %s", served.Body, platform.Body)
	}
	var want osb.CatalogResponse
	if err := json.Unmarshal([]byte(served.Body), &want); err != nil {
		t.Fatalf("broker catalog: %v", err)
	}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("catalog (-served +client):\n%s", diff)
	}
	var plans []string
	for _, s := range got.Services {
		for _, p := range s.Plans {
			plans = append(plans, s.Name+"/"+p.Name+" "+p.ID)
		}
	}
	if diff := cmp.Diff(l.plans, plans); diff != "" {
		t.Errorf("plans (-want +got):\n%s", diff)
	}
}

// wantOperation checks the operation string of a 202: modern brokers name
// their operations, OSB 2.8 predates that.
func (l *lifecycle) wantOperation(t *testing.T, op *osb.OperationKey) {
	t.Helper()
	if l.modern && (op == nil || *op == "") {
		t.Errorf("operation = %v, want one", op)
	}
	if !l.modern && op != nil {
		t.Errorf("operation = %q, want none from an OSB 2.8 broker", *op)
	}
}

// wantPolls checks the answers of poll: "in progress" until the operation
// is due, then end ("succeeded" or gone).
func (l *lifecycle) wantPolls(t *testing.T, answers []*osb.LastOperationResponse, wasGone bool, end string) {
	t.Helper()
	var got []string
	for _, a := range answers {
		got = append(got, string(a.State))
	}
	if wasGone {
		got = append(got, gone)
	}
	want := append(slices.Repeat([]string{inProgress}, inProgressRuns), end)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("last_operation states (-want +got):\n%s", diff)
	}
	if len(answers) > 0 {
		if diff := cmp.Diff(l.pollDelay, answers[0].PollDelay); diff != "" {
			t.Errorf("poll delay of an in-progress answer (-want +got):\n%s", diff)
		}
	}
}

func (l *lifecycle) pollInstance(t *testing.T, id, plan string, op *osb.OperationKey) ([]*osb.LastOperationResponse, bool) {
	t.Helper()
	return l.e.poll(t, func() (*osb.LastOperationResponse, error) {
		return l.c.PollLastOperation(&osb.LastOperationRequest{InstanceID: id, ServiceID: &l.serviceID, PlanID: &plan, OperationKey: op})
	})
}

func (l *lifecycle) pollBinding(t *testing.T, id, bindingID, plan string, op *osb.OperationKey) ([]*osb.LastOperationResponse, bool) {
	t.Helper()
	return l.e.poll(t, func() (*osb.LastOperationResponse, error) {
		return l.c.PollBindingLastOperation(&osb.BindingLastOperationRequest{
			InstanceID: id, BindingID: bindingID, ServiceID: &l.serviceID, PlanID: &plan, OperationKey: op,
		})
	})
}

// hop is an exchange as compared across the gateway.
type hop struct {
	Method, Path, Query string
	Status              int
	Body                string
}

// wire checks every exchange of the lifecycle on both sides of the gateway:
// the broker got each request (same method, path below its base, query)
// with its own credentials and the negotiated version, and the platform got
// each answer unchanged.
func (l *lifecycle) wire(t *testing.T) {
	var platform, broker []hop
	for _, x := range l.e.gateway.exchanges() {
		path, ok := strings.CutPrefix(x.Path, l.prefix)
		if !ok {
			t.Errorf("platform request %s %s is outside %s", x.Method, x.Path, l.prefix)
		}
		platform = append(platform, hop{x.Method, path, x.Query, x.Status, x.Body})
	}
	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(l.brokerUser+":"+l.brokerPass))
	for _, x := range l.e.brokers[l.broker].exchanges() {
		broker = append(broker, hop{x.Method, x.Path, x.Query, x.Status, x.Body})
		if x.auth != wantAuth {
			t.Errorf("%s %s reached the broker with Authorization %q, want the broker's own credentials", x.Method, x.Path, x.auth)
		}
		if x.version != l.sentVersion {
			t.Errorf("%s %s reached the broker with X-Broker-API-Version %q, want %q", x.Method, x.Path, x.version, l.sentVersion)
		}
	}
	if diff := cmp.Diff(broker, platform); diff != "" {
		t.Errorf("exchanges (-broker side +platform side):\n%s", diff)
	}
	if len(platform) < 25 {
		t.Errorf("only %d exchanges recorded; the lifecycle makes more", len(platform))
	}
	for name, tp := range l.e.brokers {
		if n := len(tp.exchanges()); name != l.broker && n != 0 {
			t.Errorf("broker %s got %d requests meant for %s", name, n, l.broker)
		}
	}
}

// wantHTTPError checks that err is the client's HTTPStatusCodeError with
// status.
func wantHTTPError(t *testing.T, err error, status int) *osb.HTTPStatusCodeError {
	t.Helper()
	he, ok := osb.IsHTTPError(err)
	if !ok {
		t.Fatalf("error = %v, want an HTTP %d error", err, status)
	}
	if he.StatusCode != status {
		t.Fatalf("status = %d (%v), want %d", he.StatusCode, he, status)
	}
	return he
}
