package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/redis"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// faultTable is the gateway's failure model: every fault it survives, one
// row each. A row's steps end with the fault; then, in two separate
// worlds, the gateway mitigates what the fault left (mitigated: every
// replica runs MitigateOrphans at once), or the platform sends the same
// call again once the fault is gone (retried; a success there must have
// cancelled the pending orphan, so a mitigation afterwards sends nothing).
// Each step, and the mitigation, states what the platform saw, the locks
// and orphans left in the store, and the broker's requests by endpoint.
//
// Unless a row says otherwise: one Gateway with a memory store in front of
// the sample broker (synchronous plan; asynchronous operations are done at
// the first poll), broker timeout 5s, orphan_mitigation: mitigate,
// validation.responses: report, and every call is to instance "i". The
// clocks of the gateway, its store and the broker are one fake clock that
// only steps move; the broker timeout alone runs on real time.
//
// The kill -9 row runs the osb-gateway binary (faults_process_test.go); the
// other rows run Gateways in the test. A row with skip set exposes a
// gateway bug: it states the behaviour wanted and is skipped until the fix.
var faultTable = []faultRow{
	{
		// The platform reads what happened, not where the broker is: the
		// address and the Go error go to the log and the span only.
		name: "broker down (connection refused)",
		steps: []faultStep{{call: provision, arm: refuseNext, after: addressWithheld,
			want: state{saw: saw{502, `broker "b" could not be reached: it refused the connection`}}}},
		mitigated: &state{},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}}},
	},
	{
		name: "hang (broker timeout)",
		opts: faultOptions{timeout: 500 * time.Millisecond},
		steps: []faultStep{{call: provision, arm: inject(samplebroker.Fault{Endpoint: "provision", Hang: true, Count: 1}),
			want: state{saw: saw{504, `broker "b" did not answer within 500ms`},
				locks: []string{"b/i provision"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}}},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{
			{call: provision, // within hold_after_timeout: the broker may still be at work
				want: state{saw: saw{400, proxy.InProgress},
					locks: []string{"b/i provision"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
			{call: provision, advance: time.Second, // the hold is over
				want: state{saw: saw{201, ""}, calls: calls{"provision": 2}}},
		},
	},
	{
		name: "5xx",
		steps: []faultStep{{call: provision, arm: inject(samplebroker.Fault{Endpoint: "provision", Status: 500, Count: 1}),
			want: state{saw: saw{500, "injected fault: status 500"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}}},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2}}}},
	},
	{
		name: "5xx with orphan_mitigation: report",
		opts: faultOptions{mode: "report"},
		steps: []faultStep{{call: provision, arm: inject(samplebroker.Fault{Endpoint: "provision", Status: 503, Count: 1}),
			want: state{saw: saw{503, "injected fault: status 503"}, orphans: []string{"deprovision i reported"}, calls: calls{"provision": 1}}}},
		mitigated: &state{orphans: []string{"deprovision i reported"}, calls: calls{"provision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2}}}},
	},
	{
		name: "5xx to a bind",
		steps: []faultStep{
			{call: provision, want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}},
			{call: bind, arm: inject(samplebroker.Fault{Endpoint: "bind", Status: 502, Count: 1}),
				want: state{saw: saw{502, "injected fault: status 502"}, orphans: []string{"unbind i/k queued"},
					calls: calls{"provision": 1, "bind": 1}}},
		},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "bind": 1, "unbind": 1}},
		retried: []faultStep{{call: bind,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 1, "bind": 2}}}},
	},
	{
		name: "4xx",
		steps: []faultStep{{call: provision, arm: inject(samplebroker.Fault{Endpoint: "provision", Status: 400, Count: 1}),
			want: state{saw: saw{400, "injected fault: status 400"}, calls: calls{"provision": 1}}}},
		mitigated: &state{calls: calls{"provision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// The platform cannot read the 201, and the inventory does not
		// take it: the broker may have made nothing.
		name: "invalid JSON body (201)",
		steps: []faultStep{{call: provision, arm: inject(samplebroker.Fault{Endpoint: "provision", Status: 201, Body: `{"dashboard_url":`, Count: 1}),
			want: state{saw: saw{201, ""}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}, inventory: []string{}}}},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "deprovision": 1}, inventory: []string{}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2}, inventory: []string{"instance i succeeded"}}}},
	},
	{
		// A 200 is no orphan (the orphan-mitigation table), and a
		// malformed one is no instance either (overview-broker's
		// 200invalidjson made nothing).
		name: "invalid JSON body (200), report mode",
		steps: []faultStep{{call: provision, arm: inject(samplebroker.Fault{Endpoint: "provision", Status: 200, Body: `{"dashboard_url":`, Count: 1}),
			want: state{saw: saw{200, ""}, calls: calls{"provision": 1}, inventory: []string{}}}},
		mitigated: &state{calls: calls{"provision": 1}, inventory: []string{}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2}, inventory: []string{"instance i succeeded"}}}},
	},
	{
		// emulate.fetch and gone before a 2.14+ broker whose catalog says
		// instances_retrievable: false: GET instance of what the gateway
		// never saw, or saw deprovisioned, is the gateway's 404; the
		// broker gets no GET instance.
		name: "GET instance the gateway never saw, emulate.fetch",
		opts: faultOptions{fetch: true, gone: true, notRetrievable: true},
		steps: []faultStep{
			{call: getInstance, want: state{saw: saw{404, `the gateway never saw service instance "i" provisioned at broker "b", or saw it deprovisioned`},
				inventory: []string{}}},
			{call: provision, want: state{saw: saw{201, ""}, calls: calls{"provision": 1}, inventory: []string{"instance i succeeded"}}},
			{call: getInstance, want: state{saw: saw{200, ""}, calls: calls{"provision": 1}, inventory: []string{"instance i succeeded"}}},
			{call: deprovision, want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "deprovision": 1}, inventory: []string{}}},
			{call: getInstance, want: state{saw: saw{404, `or saw it deprovisioned`}, calls: calls{"provision": 1, "deprovision": 1}, inventory: []string{}}},
		},
		mitigated: &state{calls: calls{"provision": 1, "deprovision": 1}, inventory: []string{}},
		retried: []faultStep{{call: getInstance,
			want: state{saw: saw{404, `or saw it deprovisioned`}, calls: calls{"provision": 1, "deprovision": 1}, inventory: []string{}}}},
	},
	{
		name: "2xx refused by validation.responses: enforce",
		opts: faultOptions{responses: "enforce"},
		steps: []faultStep{{call: provision, arm: inject(samplebroker.Fault{Endpoint: "provision", Status: 201, Body: `{"dashboard_url":7}`, Count: 1}),
			want: state{saw: saw{502, "breaks the OSB rules"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}}},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// "succeeded" with a description of the wrong type: refused (502),
		// and still the end of the operation, so the lock goes.
		name: "terminal poll refused by validation.responses: enforce",
		opts: faultOptions{responses: "enforce"},
		steps: []faultStep{
			{call: provisionAsync, want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll, arm: inject(samplebroker.Fault{Endpoint: "instance_last_operation", Status: 200, Body: `{"state":"succeeded","description":5}`, Count: 1}),
				want: state{saw: saw{502, "response.last_operation.description.type"}, calls: calls{"provision": 1, "instance_last_operation": 1}}},
		},
		mitigated: &state{calls: calls{"provision": 1, "instance_last_operation": 1}},
		retried: []faultStep{{call: poll,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 2}}}},
	},
	{
		// 410 to the poll of a provision is the broker's error, not an end:
		// the rule runs (502 under enforce) and the lock stays.
		name: "410 to a provision's poll",
		opts: faultOptions{responses: "enforce"},
		steps: []faultStep{
			{call: provisionAsync, want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll, arm: inject(samplebroker.Fault{Endpoint: "instance_last_operation", Status: 410, Body: `{}`, Count: 1}),
				want: state{saw: saw{502, "response.last_operation.gone"}, locks: []string{"b/i provision async"},
					calls: calls{"provision": 1, "instance_last_operation": 1}}},
		},
		mitigated: &state{locks: []string{"b/i provision async"}, calls: calls{"provision": 1, "instance_last_operation": 1}},
		retried: []faultStep{{call: poll,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 2}}}},
	},
	{
		name: "cut-off body with Content-Length (201)",
		steps: []faultStep{{call: provision, arm: cutNext("provision", 0, false),
			want: state{saw: saw{502, "its body was cut short"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}}},
		// The broker did create the instance: the DELETE finds it.
		mitigated: &state{undo: []int{200}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision, // the broker has it already
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}}},
	},
	{
		name: "cut-off chunked body (201)",
		steps: []faultStep{{call: provision, arm: cutNext("provision", 0, true),
			want: state{saw: saw{502, "its body was cut short"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}}},
		mitigated: &state{undo: []int{200}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// A 200 says the instance existed already, perhaps a platform's:
		// never undone, cut or not. The platform got a 502, so it does not
		// hold it: the gateway reports it, so that it stays named.
		name: "cut-off body of a 200",
		steps: []faultStep{{call: provision, arm: cutNext("provision", 200, false),
			want: state{saw: saw{502, "its body was cut short"}, orphans: []string{"deprovision i reported"}, calls: calls{"provision": 1}}}},
		mitigated: &state{orphans: []string{"deprovision i reported"}, calls: calls{"provision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}}},
	},
	{
		name: "wrong status (204 to a provision)",
		steps: []faultStep{{call: provision, arm: inject(samplebroker.Fault{Endpoint: "provision", Status: 204, Count: 1}),
			want: state{saw: saw{204, ""}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}}},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// The broker call runs on after the platform hangs up (a reset:
		// a read that fails other than with EOF); the 201 it never got
		// makes an orphan.
		name: "platform hangs up mid-provision",
		steps: []faultStep{{call: hangUpRSTProvision, during: resetAndGone,
			want: state{saw: saw{0, "hung up (reset)"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}}},
		mitigated: &state{undo: []int{200}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// A close with a FIN reads as a half-close (EOF): the gateway
		// writes the 201, and its write succeeds (the first write to a
		// closed peer always does), so the answer counts as delivered:
		// no orphan, though nobody read it. Only a failed write, or a
		// reset, makes one.
		name: "platform hangs up mid-provision with a FIN",
		steps: []faultStep{{call: hangUpFINProvision, during: hangUp,
			want: state{saw: saw{0, "hung up (FIN)"}, calls: calls{"provision": 1}}}},
		mitigated: &state{calls: calls{"provision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// A half-closed platform still reads (RFC 9112 §9.6): it gets
		// the 201, which is never undone.
		name: "platform half-closes a provision (lean)",
		opts: faultOptions{server: config.ServerLean},
		steps: []faultStep{{call: halfClosedProvision, during: pastHangupAfter,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}}},
		mitigated: &state{calls: calls{"provision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}}},
	},
	{
		name: "platform half-closes a provision (standard)",
		opts: faultOptions{server: config.ServerStandard},
		steps: []faultStep{{call: halfClosedProvision, during: pastHangupAfter,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}}},
		mitigated: &state{calls: calls{"provision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}}},
	},
	{
		name: "platform half-closes a bind",
		steps: []faultStep{
			{call: provision, want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}},
			{call: halfClosedBind, during: pastHangupAfter,
				want: state{saw: saw{201, ""}, calls: calls{"provision": 1, "bind": 1}}},
		},
		mitigated: &state{calls: calls{"provision": 1, "bind": 1}},
		retried: []faultStep{{call: bind,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "bind": 2}}}},
	},
	{
		// The poll is served: the broker's answer, never an empty 200.
		name: "platform half-closes a poll",
		steps: []faultStep{
			{call: provisionAsync, want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: halfClosedPoll, during: pastHangupAfter,
				want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 1}}},
		},
		mitigated: &state{calls: calls{"provision": 1, "instance_last_operation": 1}},
		retried: []faultStep{{call: poll,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 2}}}},
	},
	{
		// A platform without accepts_incomplete, a plan the broker
		// serves only asynchronously: the gateway repeats the call with
		// the flag, polls, and answers 201 once it succeeded.
		name: "422 AsyncRequired with emulate.sync_within",
		opts: faultOptions{syncWithin: 50 * time.Second},
		steps: []faultStep{{call: provisionFlagless,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2, "instance_last_operation": 1}}}},
		mitigated: &state{calls: calls{"provision": 2, "instance_last_operation": 1}},
		retried: []faultStep{{call: provisionFlagless, // the broker has it: 200 at once
			want: state{saw: saw{200, ""}, calls: calls{"provision": 3, "instance_last_operation": 1}}}},
	},
	{
		// The operation the gateway waited for failed: a 400 with the
		// broker's description, which nobody mitigates (a failed
		// last_operation never is).
		name: "an operation that fails, with emulate.sync_within",
		opts: faultOptions{syncWithin: 50 * time.Second},
		steps: []faultStep{{call: provisionFlagless, arm: inject(samplebroker.Fault{Endpoint: "provision", FailOperation: true, Count: 2}),
			want: state{saw: saw{400, `broker "b" reported the asynchronous provision failed`},
				calls: calls{"provision": 2, "instance_last_operation": 1}}}},
		mitigated: &state{calls: calls{"provision": 2, "instance_last_operation": 1}},
		retried: []faultStep{{call: provisionFlagless,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 4, "instance_last_operation": 2}}}},
	},
	{
		// The broker's 412 to the catalog at the platform's version is that
		// version's answer, passed through and cached (never a 503 that a
		// platform retries forever): the provision, which needs the
		// catalog, gets it without a broker call; a 4xx, so no orphan.
		name: "broker refuses the platform's version (412)",
		opts: faultOptions{versions: brokerMin215},
		steps: []faultStep{{call: provision,
			want: state{saw: saw{412, "X-Broker-API-Version 2.14 is below 2.15, the lowest this broker accepts"}}}},
		mitigated: &state{},
		retried: []faultStep{{call: provision, // the refusal lasts
			want: state{saw: saw{412, "X-Broker-API-Version 2.14 is below 2.15, the lowest this broker accepts"}}}},
	},
	{
		name: "store down before a call",
		env:  redisEnv,
		steps: []faultStep{{call: provision, arm: stopStore, after: startStore,
			want: state{saw: saw{503, "operation state is unavailable"}}}},
		mitigated: &state{},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}}},
	},
	{
		// Redis restarts without its data during an async provision: the
		// lock goes with everything else. The gateway refuses to work on
		// the emptied Redis (it used to go on with an empty store and let
		// a second call through to the broker during the operation) until
		// the operator imports what the broker holds and accepts the
		// loss; the lost lock stays lost.
		name: "store restarts empty during an async provision",
		env:  redisEnv,
		steps: []faultStep{
			{call: provisionAsync, want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: provision, arm: restartStoreEmpty, after: acceptLoss,
				want: state{saw: saw{503, "operation state is unavailable"}, calls: calls{"provision": 1}, inventory: []string{"instance i none"}}},
		},
		mitigated: &state{calls: calls{"provision": 1}},
		retried: []faultStep{{call: poll,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 1}}}},
	},
	{
		// A provision under a quota counts the tenant's instances first:
		// with the store down, it cannot, and the broker gets nothing.
		name: "store down while counting a quota",
		env:  redisEnv,
		opts: faultOptions{quotas: []config.Quota{{Name: "all", MaxInstances: ptrTo(5)}}},
		steps: []faultStep{{call: provision, arm: stopStore, after: startStore,
			want: state{saw: saw{503, `the gateway cannot count tenant "t"'s instances against its quotas`}}}},
		mitigated: &state{},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}}},
	},
	{
		// The inventory record and the release fail; both are retried,
		// the record first, until the store is back: the instance the
		// platform got stays named.
		name: "store down during a call, and back",
		env:  redisEnv,
		steps: []faultStep{{call: provision, during: stopStore, after: startStore,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 1}, inventory: []string{"instance i succeeded"}}}},
		mitigated: &state{calls: calls{"provision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// The orphan candidate waits in the retry queue with the call's
		// lock until the store takes it; then the undo goes.
		name: "store down during a failed call, and back",
		env:  redisEnv,
		steps: []faultStep{{call: provision, arm: inject(samplebroker.Fault{Endpoint: "provision", Status: 500, Count: 1}),
			during: stopStore, after: startStore,
			want: state{saw: saw{500, "injected fault: status 500"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}}},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// The poll cannot see the lock; its "succeeded" releases it once
		// the store is back.
		name: "store down during a poll, and back",
		env:  redisEnv,
		steps: []faultStep{
			{call: provisionAsync, want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll, arm: stopStore, after: startStore,
				want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 1}}},
		},
		mitigated: &state{calls: calls{"provision": 1, "instance_last_operation": 1}},
		retried: []faultStep{{call: poll,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 2}}}},
	},
	{
		// The async lock is in the bolt file: the restarted gateway still
		// blocks the instance, and its first terminal poll releases it.
		name: "kill -9 mid-async on bolt",
		env:  processEnv,
		steps: []faultStep{{call: provisionAsync, after: killAndRestart,
			want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}}},
		retried: []faultStep{
			{call: provisionAsync,
				want: state{saw: saw{400, proxy.InProgress}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll, want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 1}}},
			{call: provisionAsync,
				want: state{saw: saw{200, ""}, calls: calls{"provision": 2, "instance_last_operation": 1}}},
		},
	},
	{
		// The restarted process reports the shimmed call lost at once
		// (the bolt file was its predecessor's), but holds the instance
		// until the broker call must be over: a retry gets 400, and the
		// undo's DELETE goes only when the hold ends, finding what the
		// broker made after the kill.
		name: "kill -9 during a shimmed call on bolt",
		env:  processEnv,
		steps: []faultStep{
			{call: provisionIncomplete, arm: shimProcess(false), after: killDuringShim,
				want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
			{call: poll, want: state{saw: saw{200, "the gateway restarted during the broker call"},
				locks: []string{"b/i provision async"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
			{call: provisionIncomplete, after: undoneWhenHoldEnds,
				want: state{saw: saw{400, proxy.InProgress}, calls: calls{"provision": 1, "deprovision": 1}}},
		},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2, "deprovision": 1}}}},
	},
	{
		// On Redis the restarted process is another replica: the call
		// stays in progress (a retry gets 400) until its time is over and
		// a challenge of the dead replica went unanswered; then as on bolt.
		// About 85s of real time: the call's timeout and a minute, the
		// challenge (20s), the hold (2s).
		name: "kill -9 during a shimmed call on redis",
		env:  processEnv,
		steps: []faultStep{
			{call: provisionIncomplete, arm: shimProcess(true), after: killDuringShim,
				want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll, want: state{saw: saw{200, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: provisionIncomplete, after: undoneWhenHoldEnds,
				want: state{saw: saw{400, proxy.InProgress}, calls: calls{"provision": 1, "deprovision": 1}}},
		},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2, "deprovision": 1}}}},
	},
	{
		// The replica that runs the call keeps the outcome (and its
		// inventory record) the paused store did not take, and writes it
		// once the store is back: the poll, after the call's time, reports
		// the success, and nothing is undone.
		name: "store pause during a shimmed call on redis",
		env:  redisEnv,
		opts: faultOptions{asyncAfter: 50 * time.Millisecond},
		steps: []faultStep{
			{call: provisionIncomplete, during: pauseDuringShim, after: resumeAfterShim,
				want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll, advance: 2 * time.Minute,
				want: state{saw: saw{200, ""}, calls: calls{"provision": 1}, inventory: []string{"instance i succeeded"}}},
		},
		mitigated: &state{calls: calls{"provision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// Refused before the broker: a 429 the platform retries, no lock,
		// no orphan (a 4xx sets off no DELETE).
		name: "over the tenant's rate limit",
		opts: faultOptions{limits: &config.Limits{Mutations: &config.LimitRate{Rate: 1, Burst: 1}, Scope: config.LimitScopeLocal}},
		steps: []faultStep{
			{call: provision, want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}},
			{call: bind, want: state{saw: saw{429, `rate limit: tenant "t" may make 1 mutating calls per second (burst 1)`},
				calls: calls{"provision": 1}}},
		},
		mitigated: &state{calls: calls{"provision": 1}},
		retried: []faultStep{{call: bind, advance: time.Second, // a token again
			want: state{saw: saw{201, ""}, calls: calls{"provision": 1, "bind": 1}}}},
	},
	{
		// While a provision is held at the broker, with listen.max_in_flight
		// 1 a poll gets 503 and a bind 429, at once and never forwarded.
		name: "overload (listen.max_in_flight)",
		opts: faultOptions{maxInFlight: 1},
		steps: []faultStep{{call: provision, during: shed(map[*platformCall]saw{
			&poll: {503, "the gateway is overloaded"}, &bind: {429, "the gateway is overloaded"}}),
			want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}}},
		mitigated: &state{calls: calls{"provision": 1}},
		retried:   []faultStep{{call: bind, want: state{saw: saw{201, ""}, calls: calls{"provision": 1, "bind": 1}}}},
	},
	{
		// One 500 opens the breaker (failures: 1): then a provision gets 429
		// and a poll 503 at once, never forwarded, no lock taken; the
		// mitigation, the gateway's own call, still goes. Retries get 429
		// until open_for (an hour here) has passed.
		name: "circuit breaker open (brokers[].breaker)",
		opts: faultOptions{breaker: &config.Breaker{Failures: 1, OpenFor: time.Hour, Probes: 1}},
		steps: []faultStep{
			{call: provision, arm: inject(samplebroker.Fault{Endpoint: "provision", Status: 500, Count: 1}),
				want: state{saw: saw{500, "injected fault: status 500"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
			{call: provision, want: state{saw: saw{429, `broker "b" is failing: last error: broker "b" answered provision with status 500`},
				orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
			{call: poll, want: state{saw: saw{503, `broker "b" is failing`}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
		},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{429, `broker "b" is failing`}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}}},
	},
	{
		// While a provision holds the broker's only slot (max_in_flight 1,
		// queue_timeout 0s), a poll gets 503 and a bind 429, at once and
		// never forwarded.
		name: "broker at max_in_flight",
		opts: faultOptions{brokerCap: 1},
		steps: []faultStep{{call: provision, during: shed(map[*platformCall]saw{
			&poll: {503, `broker "b" has 1 calls in flight, its cap`}, &bind: {429, `broker "b" has 1 calls in flight, its cap`}}),
			want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}}},
		mitigated: &state{calls: calls{"provision": 1}},
		retried:   []faultStep{{call: bind, want: state{saw: saw{201, ""}, calls: calls{"provision": 1, "bind": 1}}}},
	},
	{
		// Both replicas mitigate at once; each orphan is claimed by one.
		name: "two replicas on one redis-server",
		env:  replicasEnv,
		steps: []faultStep{{call: provision, count: replicaOrphans,
			arm:  inject(samplebroker.Fault{Endpoint: "provision", Status: 500, Count: replicaOrphans}),
			want: state{saw: saw{500, "injected fault"}, orphans: each(replicaOrphans, "deprovision i%d queued"), calls: calls{"provision": replicaOrphans}}}},
		mitigated: &state{undo: repeat(410, replicaOrphans), calls: calls{"provision": replicaOrphans, "deprovision": replicaOrphans}},
		retried: []faultStep{{call: provision, count: replicaOrphans,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2 * replicaOrphans}}}},
	},
	{
		// The async shim answers 202 for the broker once async_after has
		// passed, and the polls itself: the broker sees no last_operation.
		name: "slower than emulate.async_after",
		opts: faultOptions{asyncAfter: 50 * time.Millisecond},
		steps: []faultStep{
			{call: provisionIncomplete, during: shimAnswered, after: shimSettled,
				want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll, want: state{saw: saw{200, ""}, calls: calls{"provision": 1}}},
		},
		mitigated: &state{calls: calls{"provision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}}},
	},
	{
		name: "5xx after the async shim's 202",
		opts: faultOptions{asyncAfter: 50 * time.Millisecond},
		steps: []faultStep{
			{call: provisionIncomplete, arm: inject(samplebroker.Fault{Endpoint: "provision", Status: 500, Count: 1}), during: shimAnswered, after: shimSettled,
				want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
			{call: poll, want: state{saw: saw{200, "injected fault: status 500"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
		},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// A malformed 201 is a failure to the platform (Cloud Controller
		// takes it as one) and an orphan candidate: the poll must not say
		// "succeeded" for what the undo then deletes.
		name: "invalid JSON body (201) after the async shim's 202",
		opts: faultOptions{asyncAfter: 50 * time.Millisecond},
		steps: []faultStep{
			{call: provisionIncomplete, arm: inject(samplebroker.Fault{Endpoint: "provision", Status: 201, Body: `{"dashboard_url":`, Count: 1}), during: shimAnswered, after: shimSettled,
				want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
			{call: poll, want: state{saw: saw{200, "its body is not a JSON object"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1},
				inventory: []string{"instance i failed"}}},
		},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// The poll reports the timeout, and the lock stays for
		// hold_after_timeout: the broker may still be at work.
		name: "hang after the async shim's 202 (broker timeout)",
		opts: faultOptions{asyncAfter: 50 * time.Millisecond, timeout: 500 * time.Millisecond},
		steps: []faultStep{
			{call: provisionIncomplete, arm: inject(samplebroker.Fault{Endpoint: "provision", Hang: true, Count: 1}), during: shimAnswered, after: shimSettled,
				want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
			{call: poll, want: state{saw: saw{200, `broker "b" did not answer within 500ms`},
				locks: []string{"b/i provision async"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
		},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{
			{call: provision,
				want: state{saw: saw{400, proxy.InProgress}, locks: []string{"b/i provision async"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
			{call: provision, advance: time.Second,
				want: state{saw: saw{201, ""}, calls: calls{"provision": 2}}},
		},
	},
}

// replicaOrphans is how many orphans the two replicas mitigate at once.
const replicaOrphans = 8

// TestFaults runs the fault table.
func TestFaults(t *testing.T) {
	for _, row := range faultTable {
		t.Run(row.name, func(t *testing.T) {
			if row.skip != "" {
				t.Skip(row.skip)
			}
			t.Parallel()
			if row.mitigated != nil {
				t.Run("mitigated", func(t *testing.T) {
					t.Parallel()
					f := row.setUp(t)
					f.clock.Advance(time.Second) // past any hold_after_timeout
					if diff := cmp.Diff(row.mitigated.undo, f.mitigate(), cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("the broker's answers to the mitigation's DELETEs (-want +got):\n%s", diff)
					}
					f.check(t, "after the mitigation", *row.mitigated)
				})
			}
			t.Run("retried", func(t *testing.T) {
				t.Parallel()
				f := row.setUp(t)
				for i, s := range row.retried {
					f.step(t, fmt.Sprintf("retry %d", i+1), s)
				}
				if f.gateways == nil {
					return // the process mitigates on its own ticker
				}
				// What the retries made the platform's is not undone: the
				// success cancelled the pending orphan.
				f.clock.Advance(time.Second)
				left := row.retried[len(row.retried)-1].want.orphans
				if got, want := len(f.mitigate()), queued(left); got != want {
					t.Errorf("the mitigation after the retries sent %d DELETEs, want %d (orphans left: %q)", got, want, left)
				}
			})
		})
	}
}

// faultRow is one fault: the steps that lead to it and end with it, and
// what follows in each of two worlds.
type faultRow struct {
	name string
	env  envKind
	opts faultOptions
	// skip, when set, names the gateway bug the row exposes.
	skip  string
	steps []faultStep
	// mitigated is the state after MitigateOrphans on every replica at
	// once, the clock moved past any hold; nil: not run.
	mitigated *state
	// retried are the platform's next calls, the fault gone.
	retried []faultStep
}

// faultStep is one platform call (or count of them) and what it leaves.
type faultStep struct {
	call    platformCall
	count   int                         // calls to instances i0..i<count-1>, round robin over the replicas; 0: one to "i"
	advance time.Duration               // the clock moves this much first
	timeout time.Duration               // how long the platform waits for an answer; 0: 10s
	arm     func(*testing.T, *faultEnv) // before the call: makes the broker or the store misbehave
	during  func(*testing.T, *faultEnv) // while the broker holds the call
	after   func(*testing.T, *faultEnv) // after the platform's answer, before the checks
	want    state
}

// state is what a step or a mitigation leaves. Empty fields mean none.
type state struct {
	saw     saw      // what the platform saw (steps)
	undo    []int    // the broker's answers to the DELETEs (mitigation)
	locks   []string // store.List: "key kind[ async]"
	orphans []string // store.ListOrphans: "kind instance[/binding] reported|queued"
	calls   calls    // the broker's requests so far, by endpoint
	// inventory is the gateway's inventory: "instance <id> <state>" /
	// "binding <id>/<bid> <state>" (whatever states the inventory has);
	// nil: not checked ([]string{}: empty).
	inventory []string
}

// platformCall is a call the platform makes with the OSB client.
type platformCall struct {
	name     string
	endpoint string // the sample broker's endpoint name
	send     func(c osb.Client, id string) error
}

var (
	serviceID, asyncPlan = samplebroker.ServiceID, samplebroker.PlanAsyncID

	provision = platformCall{"provision", samplebroker.EndpointProvision, func(c osb.Client, id string) error {
		_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: serviceID,
			PlanID: samplebroker.PlanSyncID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
		return err
	}}
	provisionAsync = platformCall{"async provision", samplebroker.EndpointProvision, func(c osb.Client, id string) error {
		_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, AcceptsIncomplete: true, ServiceID: serviceID,
			PlanID: asyncPlan, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
		return err
	}}
	provisionFlagless = platformCall{"async-only provision without accepts_incomplete", samplebroker.EndpointProvision, func(c osb.Client, id string) error {
		_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: serviceID,
			PlanID: asyncPlan, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
		return err
	}}
	provisionIncomplete = platformCall{"provision with accepts_incomplete", samplebroker.EndpointProvision, func(c osb.Client, id string) error {
		_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, AcceptsIncomplete: true, ServiceID: serviceID,
			PlanID: samplebroker.PlanSyncID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
		return err
	}}
	poll = platformCall{"last_operation", samplebroker.EndpointInstanceLastOperation, func(c osb.Client, id string) error {
		_, err := c.PollLastOperation(&osb.LastOperationRequest{InstanceID: id, ServiceID: &serviceID, PlanID: &asyncPlan})
		return err
	}}
	bind = platformCall{"bind", samplebroker.EndpointBind, func(c osb.Client, id string) error {
		_, err := c.Bind(&osb.BindRequest{BindingID: "k", InstanceID: id, ServiceID: serviceID, PlanID: samplebroker.PlanSyncID})
		return err
	}}
)

// Faults and recoveries, for arm, during and after.

func inject(fault samplebroker.Fault) func(*testing.T, *faultEnv) {
	return func(t *testing.T, f *faultEnv) {
		if err := f.broker.InjectFault(fault); err != nil {
			t.Fatalf("InjectFault: %v", err)
		}
	}
}

func cutNext(endpoint string, status int, chunked bool) func(*testing.T, *faultEnv) {
	return func(_ *testing.T, f *faultEnv) { f.front.cut(endpoint, status, chunked) }
}

// platformGone waits until the gateway sees the platform's call in flight
// end: it is held at the broker, so only the platform hanging up ends it.
func platformGone(t *testing.T, f *faultEnv) {
	t.Helper()
	f.mu.Lock()
	ctx := f.inflight
	f.mu.Unlock()
	await(t, ctx.Done(), "the gateway to see the platform hang up")
}

// shimAnswered waits until the platform's call held at the broker has its
// answer: the async shim's 202.
func shimAnswered(t *testing.T, f *faultEnv) {
	t.Helper()
	platformGone(t, f) // the gateway's handler returned, and its request context with it
}

// shimSettled waits until the async shim recorded the outcome of the
// broker call it answered 202 for (instance "i"), so that the next poll
// reports it.
func shimSettled(t *testing.T, f *faultEnv) {
	t.Helper()
	waitFor(t, "the async shim's outcome", func() bool {
		l, err := f.stores[0].Get(context.Background(), store.LockKey("b", "i"))
		return err == nil && l.Shim.State != store.StateInProgress
	})
}

func refuseNext(_ *testing.T, f *faultEnv) { f.refuse.n.Store(1) }

// shed sends each call while the broker holds another, and checks the
// platform saw what want says.
func shed(want map[*platformCall]saw) func(*testing.T, *faultEnv) {
	return func(t *testing.T, f *faultEnv) {
		t.Helper()
		for c, w := range want {
			if got := f.send(t, *c, 0, "j", 0, nil); got.status != w.status || !strings.Contains(got.desc, w.desc) {
				t.Errorf("%s while overloaded: the platform saw %d %q, want %d with %q", c.name, got.status, got.desc, w.status, w.desc)
			}
		}
	}
}

func stopStore(_ *testing.T, f *faultEnv) { f.redis.Stop() }

func startStore(_ *testing.T, f *faultEnv) { f.redis.Start() }

func restartStoreEmpty(_ *testing.T, f *faultEnv) { f.redis.RestartEmpty() }

// acceptLoss is the operator's osb-gateway state accept-loss -import on
// the row's Redis, once every gateway has refused it: a line for each
// instance and binding the broker holds (read from its own database, or
// the platform's list), then the acceptance.
func acceptLoss(t *testing.T, f *faultEnv) {
	t.Helper()
	ctx := context.Background()
	cfg := store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{f.redis.Addr}}}.WithDefaults()
	st, err := redis.OpenUnchecked(cfg.Redis, f.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := f.broker.Holdings()
	var lines []store.Entry
	for _, id := range at.Instances {
		lines = append(lines, store.Entry{Instance: &store.Instance{Broker: "b", InstanceID: id, Tenant: "t"}})
	}
	for _, b := range at.Bindings {
		id, bid, _ := strings.Cut(b, "/")
		lines = append(lines, store.Entry{Binding: &store.Binding{Broker: "b", InstanceID: id, BindingID: bid, Tenant: "t"}})
	}
	if _, err := st.Import(ctx, lines, false); err != nil {
		t.Fatalf("import what the platform holds: %v", err)
	}
	if was, _, err := redis.AcceptLoss(ctx, st); err != nil || was.State != redis.EpochLost {
		t.Fatalf("accept the loss: the marker was %v, %v; want the gateway to have marked the loss", was, err)
	}
}

// queued counts the orphans due for mitigation.
func queued(orphans []string) int {
	n := 0
	for _, o := range orphans {
		if strings.HasSuffix(o, " queued") {
			n++
		}
	}
	return n
}

func each(n int, format string) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = fmt.Sprintf(format, i)
	}
	return out
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}
