package main

import (
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// The checker is judged on histories made by hand: each rule must flag
// what breaks it and pass what does not.

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func newVerdict() *verdict {
	return &verdict{
		store: "redis",
		held:  map[string]string{},
		brokers: map[string]*brokerView{
			"modern": {instances: map[string]bool{}, bindings: map[string]bool{}},
			"legacy": {instances: map[string]bool{}, bindings: map[string]bool{}},
		},
		gw:         &gatewayView{inventory: map[string]bool{}, orphans: map[string]bool{}},
		shimmed:    map[string]bool{"legacy": true},
		fetched:    map[string]bool{"legacy": true},
		idempotent: map[string]bool{"legacy": true},
		careless:   map[int]string{},
	}
}

func rules(v *verdict) string {
	var s []string
	for _, x := range v.violations {
		s = append(s, x.Rule)
	}
	return strings.Join(s, ",")
}

func TestCheckerHoldings(t *testing.T) {
	v := newVerdict()
	v.held["i1"], v.held["i2"], v.held["i1/b1"] = "modern", "modern", "modern"
	v.brokers["modern"].instances["i1"] = true // i2 is missing: (a)
	v.brokers["modern"].bindings["i1/b1"] = true
	v.brokers["modern"].instances["i3"] = true // nobody holds it: (b)
	v.brokers["modern"].instances["i4"] = true // the orphan queue names it: fine
	v.gw.orphans["modern i4"] = true
	v.brokers["legacy"].bindings["i5/b2"] = true // only the inventory: (b)
	v.gw.inventory["legacy i5/b2"] = true
	v.checkHoldings()
	if got := rules(v); got != "a,b,b" {
		t.Fatalf("rules = %q, want a,b,b:\n%v", got, v.violations)
	}
	if !strings.Contains(v.violations[1].What, "only the inventory names it") {
		t.Errorf("the inventory-only holding is not said so: %s", v.violations[1].What)
	}
}

func TestCheckerLocks(t *testing.T) {
	v := newVerdict()
	v.checkLocks()
	if len(v.violations) != 0 {
		t.Fatal(v.violations)
	}
	v.gw.locks = []string{"modern/i1 provision async=true"}
	v.checkLocks()
	if rules(v) != "c" {
		t.Fatal(v.violations)
	}
}

func TestChecker5xx(t *testing.T) {
	v := newVerdict()
	v.faults = []*fault{
		{Kind: fBrokerCrash, Target: "modern", Start: at(10), End: at(12)},
		{Kind: fRedisPause, Target: "redis", Start: at(30), End: at(33)},
	}
	v.ops = []*op{
		{Kind: "provision", Broker: "modern", Start: at(11), End: at(11.1), Status: 502, Desc: `broker "modern" could not be reached: it refused the connection`},
		{Kind: "provision", Broker: "modern", Start: at(20), End: at(20.1), Status: 502, Desc: `broker "modern" could not be reached`}, // no fault: (d)
		{Kind: "bind", Broker: "legacy", Start: at(11), End: at(11.1), Status: 504, Desc: `broker "legacy" did not answer within 4s`},  // the other broker: (d)
		{Kind: "update", Broker: "modern", Start: at(31), End: at(31.2), Status: 503, Desc: "the gateway's operation state is unavailable, so …"},
		{Kind: "update", Broker: "modern", Start: at(50), End: at(50.2), Status: 503, Desc: "the gateway's operation state is unavailable, so …"},           // (d)
		{Kind: "unbind", Broker: "modern", Start: at(60), End: at(60.1), Status: 500, Desc: "internal error"},                                               // (d)
		{Kind: "get", Broker: "modern", Start: at(60), End: at(60.1), Status: 500, Desc: "internal error"},                                                  // not mutating
		{Kind: "bind", Broker: "modern", Start: at(15), End: at(15.1), Status: 503, Desc: `the catalog of broker "modern" is unavailable (none is cached)`}, // remembered from the crash
	}
	v.check5xx()
	if got := rules(v); got != "d,d,d,d" {
		t.Fatalf("rules = %q, want 4 × d:\n%v", got, v.violations)
	}
}

func TestCheckerOverlaps(t *testing.T) {
	v := newVerdict()
	l := func(ep, b string, others ...string) callLine {
		c := callLine{Endpoint: ep, InstanceID: "i1", BindingID: b, Start: at(1), End: at(2)}
		for i := 0; i+1 < len(others); i += 2 {
			c.InFlight = append(c.InFlight, samplebroker.CallFlight{Endpoint: others[i], BindingID: others[i+1]})
		}
		return c
	}
	busy := l("bind", "b3")
	busy.InProgress = &samplebroker.CallOperation{Endpoint: "provision", Operation: "provision-7"}
	v.brokers["modern"].calls = []callLine{
		l("bind", "b1", "bind", "b2"),   // two bindings side by side: allowed
		l("bind", "b1", "unbind", "b1"), // one binding twice: (e)
		l("update", "", "bind", "b2"),   // an update during a bind: (e)
		l("provision", ""),              // alone: fine
		busy,                            // during the async provision: (e)
	}
	v.checkOverlaps()
	if got := rules(v); got != "e,e,e" {
		t.Fatalf("rules = %q, want 3 × e:\n%v", got, v.violations)
	}
}

func TestCheckerInvented(t *testing.T) {
	v := newVerdict()
	v.brokers["modern"].calls = []callLine{
		{Endpoint: "provision", InstanceID: "i1", Status: 201, Start: at(1), End: at(1.1)},
		{Endpoint: "provision", InstanceID: "i2", Status: 202, Start: at(1), End: at(1.1)},
		{Endpoint: "bind", InstanceID: "i1", BindingID: "b1", Status: 500, Start: at(2), End: at(2.1)},
	}
	v.ops = []*op{
		{Kind: "provision", Broker: "modern", Instance: "i1", Start: at(1), End: at(1.2), Status: 201},
		{ID: 2, Kind: "provision", Broker: "modern", Instance: "i2", Start: at(1), End: at(1.2), Status: 202},
		{Kind: "poll", Broker: "modern", Instance: "i2", Start: at(3), End: at(3.1), Status: 200, State: "succeeded", Of: 2},
		{Kind: "bind", Broker: "modern", Instance: "i1", Binding: "b1", Start: at(2), End: at(2.2), Status: 201},             // the broker said 500: (f)
		{Kind: "provision", Broker: "modern", Instance: "i9", Start: at(5), End: at(5.2), Status: 200},                       // never at the broker: (f)
		{ID: 3, Kind: "provision", Broker: "legacy", Instance: "i3", Start: at(5), End: at(7), Status: 202},                  // the shim's own
		{Kind: "poll", Broker: "legacy", Instance: "i3", Start: at(8), End: at(8.1), Status: 200, State: "succeeded", Of: 3}, // and its poll: (f)
		// Only the matching call counts, not an earlier 2xx of the same:
		// i1's provision at 1 s does not make this one's 201 the broker's.
		{Kind: "provision", Broker: "modern", Instance: "i1", Start: at(10), End: at(10.2), Status: 201}, // (f)
		// The legacy broker's repeats are the gateway's (emulate.idempotent).
		{Kind: "provision", Broker: "legacy", Instance: "i4", Start: at(10), End: at(10.2), Status: 200},
		// A call the broker was still serving when the op began (the
		// shim's, shared by a flight) is the matching one.
		{ID: 5, Kind: "bind", Broker: "legacy", Instance: "i4", Binding: "b2", Start: at(11), End: at(13), Status: 202},
		{Kind: "poll-binding", Broker: "legacy", Instance: "i4", Binding: "b2", Start: at(14), End: at(14.1), Status: 200, State: "succeeded", Of: 5},
		// A retry that joined the identical call its platform hung up on
		// (flights) gets the answer the broker sent to that one.
		{Kind: "unbind", Broker: "legacy", Instance: "i4", Binding: "b3", Start: at(20), End: at(20.3), Mode: modeHangUp},
		{Kind: "unbind", Broker: "legacy", Instance: "i4", Binding: "b3", Start: at(20.6), End: at(20.7), Status: 200, Why: "retry"},
	}
	v.brokers["legacy"].calls = []callLine{
		{Endpoint: "provision", InstanceID: "i4", Status: 201, Start: at(4), End: at(4.1)},
		{Endpoint: "bind", InstanceID: "i4", BindingID: "b2", Status: 201, Start: at(10.9), End: at(13.5)},
		{Endpoint: "unbind", InstanceID: "i4", BindingID: "b3", Status: 200, Start: at(20.4), End: at(20.4)},
	}
	v.checkInvented()
	if got := rules(v); got != "f,f,f,f" {
		t.Fatalf("rules = %q, want 4 × f:\n%v", got, v.violations)
	}
	if !strings.Contains(v.violations[3].What, "i1 via gw0 12:00:10.000") {
		t.Errorf("the last (f) is not the repeat of i1's provision: %s", v.violations[3].What)
	}
}

func TestPlanIsSeeded(t *testing.T) {
	a := plan(7, 10*time.Minute, "redis", 2, 4, []string{"modern", "legacy"}, 2500*time.Millisecond)
	b := plan(7, 10*time.Minute, "redis", 2, 4, []string{"modern", "legacy"}, 2500*time.Millisecond)
	c := plan(8, 10*time.Minute, "redis", 2, 4, []string{"modern", "legacy"}, 2500*time.Millisecond)
	if len(a) < 150 || len(a) != len(b) {
		t.Fatalf("%d and %d faults", len(a), len(b))
	}
	seen := map[string]bool{}
	for i := range a {
		if a[i].String() != b[i].String() {
			t.Fatalf("fault %d differs with the same seed: %s vs %s", i, a[i], b[i])
		}
		seen[a[i].Kind] = true
	}
	if len(seen) != 13 {
		t.Errorf("%d fault kinds in 10 minutes, want all 13: %v", len(seen), seen)
	}
	same := 0
	for i := range min(len(a), len(c)) {
		if a[i].String() == c[i].String() {
			same++
		}
	}
	if same > len(a)/10 {
		t.Errorf("seeds 7 and 8 share %d of %d faults", same, len(a))
	}
}

func TestCheckerLockAges(t *testing.T) {
	v := newVerdict()
	lock := func(key string, async bool, from, to float64) *seenLock {
		return &seenLock{adminLock: adminLock{Key: key, Broker: "modern", InstanceID: key, Kind: "update", Async: async, Started: at(from)}, Last: at(to)}
	}
	v.faults = []*fault{
		{Kind: fRedisPause, Target: "redis", Start: at(100), End: at(103)},
		{Kind: fGatewayKill, Target: "gw0", Start: at(300), End: at(301)},
		{Kind: fBrokerCrash, Target: "modern", Start: at(500), End: at(502)},
		{Kind: fRedisPause, Target: "redis", Start: at(804), End: at(807)},
	}
	v.ops = []*op{
		{Kind: "update", Broker: "modern", Instance: "held", Start: at(799.9), End: at(805), Status: 504},
		{Kind: "update", Broker: "modern", Instance: "held-ok", Start: at(899.9), End: at(905), Status: 504},
	}
	v.audit = []*seenLock{
		lock("short", false, 0, 20),         // within a call and its hold
		lock("phantom", false, 100, 164),    // a store pause excuses no call lock: (c)
		lock("killed", false, 300, 364),     // a killed gateway's call lock is held to its deadline
		lock("polled", true, 400, 450),      // an async operation, polled
		lock("unpolled", true, 600, 700),    // nobody settled it: (c)
		lock("broker-down", true, 490, 580), // its polls failed while the broker was down
		lock("held", false, 800, 864),       // the store paused as its call timed out: its hold was not written
		lock("held-ok", false, 900, 964),    // nothing kept its hold from being written: (c)
	}
	v.checkLockAges()
	if got := rules(v); got != "c,c,c" {
		t.Fatalf("rules = %q, want 3 × c:\n%v", got, v.violations)
	}
	for i, want := range []string{"phantom", "unpolled", "held-ok"} {
		if !strings.Contains(v.violations[i].What, want) {
			t.Errorf("violation %d is %q, want one about %s", i, v.violations[i].What, want)
		}
	}
}

func TestCheckerReads(t *testing.T) {
	type call struct {
		id       int64
		kind     string
		from, to float64
		status   int
		state    string
		of       int64
	}
	run := func(calls ...call) string {
		v := newVerdict()
		for _, c := range calls {
			v.ops = append(v.ops, &op{ID: c.id, Kind: c.kind, Broker: "modern", Instance: "i1", Start: at(c.from), End: at(c.to), Status: c.status, State: c.state, Of: c.of})
		}
		v.checkReads()
		return rules(v)
	}
	cases := []struct {
		name  string
		calls []call
		want  string
	}{
		{"a success, then gone", []call{{1, "provision", 1, 2, 201, "", 0}, {2, "get", 3, 4, 404, "", 0}}, "g"},
		{"a success, then there", []call{{1, "provision", 1, 2, 201, "", 0}, {2, "get", 3, 4, 200, "", 0}}, ""},
		{"a timeout may land later", []call{{1, "provision", 1, 5, 504, "", 0}, {2, "get", 6, 7, 404, "", 0}, {3, "get", 8, 9, 200, "", 0}}, ""},
		{"a refusal changes nothing", []call{{1, "provision", 1, 2, 400, "", 0}, {2, "get", 3, 4, 200, "", 0}}, "g"},
		{"async: gone while in progress", []call{{1, "provision", 1, 2, 202, "", 0}, {2, "get", 2.5, 3, 404, "", 0},
			{3, "poll", 4, 5, 200, "succeeded", 1}, {4, "get", 6, 7, 200, "", 0}}, ""},
		{"async: gone after its success", []call{{1, "provision", 1, 2, 202, "", 0}, {2, "poll", 4, 5, 200, "succeeded", 1},
			{3, "get", 6, 7, 404, "", 0}}, "g"},
		{"deleted, then there", []call{{1, "provision", 1, 2, 201, "", 0}, {2, "deprovision", 10, 11, 200, "", 0},
			{3, "get", 12, 13, 200, "", 0}}, "g"},
		{"a delete that failed", []call{{1, "provision", 1, 2, 201, "", 0}, {2, "deprovision", 10, 11, 202, "", 0},
			{3, "poll", 11, 12, 200, "failed", 2}, {4, "get", 12, 13, 200, "", 0}}, ""},
	}
	for _, c := range cases {
		if got := run(c.calls...); got != c.want {
			t.Errorf("%s: rules %q, want %q", c.name, got, c.want)
		}
	}
}

// TestCheckerReadsLagAfterAStoreOutage: an emulated GET (the legacy
// broker's, answered from the inventory) may lag what the platform was
// told while the store is down and up to inventoryLag after; not later,
// and never a GET the broker answers itself.
func TestCheckerReadsLagAfterAStoreOutage(t *testing.T) {
	for _, c := range []struct {
		broker string
		getAt  float64
		want   string
	}{
		{"legacy", 8, ""},   // within the lag after the outage
		{"legacy", 20, "g"}, // long after
		{"modern", 8, "g"},  // the broker's own answer
	} {
		v := newVerdict()
		v.faults = []*fault{{Kind: fRedisPause, Target: "redis", Start: at(3), End: at(5)}}
		v.ops = []*op{
			{ID: 1, Kind: "provision", Broker: c.broker, Instance: "i1", Start: at(1), End: at(2), Status: 201},
			{ID: 2, Kind: "get", Broker: c.broker, Instance: "i1", Start: at(c.getAt), End: at(c.getAt + 0.1), Status: 404},
		}
		v.checkReads()
		if got := rules(v); got != c.want {
			t.Errorf("%s GET at +%vs: rules %q, want %q", c.broker, c.getAt, got, c.want)
		}
	}
}

// TestPlanOnPostgres: on postgres the schedule is redis's of the same
// seed, its pauses and a third of its link faults aimed at PostgreSQL.
func TestPlanOnPostgres(t *testing.T) {
	r := plan(7, 10*time.Minute, "redis", 2, 4, []string{"modern", "legacy"}, 2500*time.Millisecond)
	p := plan(7, 10*time.Minute, "postgres", 2, 4, []string{"modern", "legacy"}, 2500*time.Millisecond)
	if len(r) != len(p) {
		t.Fatalf("%d faults on redis, %d on postgres", len(r), len(p))
	}
	pauses, links := 0, 0
	for i := range r {
		want := strings.NewReplacer("redis-sigstop", "postgres-sigstop", " redis", " postgres").Replace(r[i].String())
		if p[i].String() != want {
			t.Fatalf("fault %d: %s on postgres, want %s", i, p[i], want)
		}
		switch {
		case p[i].Kind == fPgPause && p[i].Target == "postgres":
			pauses++
		case p[i].Target == "postgres":
			links++
		}
	}
	if pauses == 0 || links == 0 {
		t.Errorf("%d pauses of postgres, %d link faults on it, want some of each", pauses, links)
	}
}

// TestChecker5xxBlamesPostgres: a 503 that blames the state store is
// excused by a fault on PostgreSQL's side when the store is postgres, and
// by nothing else.
func TestChecker5xxBlamesPostgres(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault *fault
		want  string
	}{
		{"paused", &fault{Kind: fPgPause, Target: "postgres", Start: at(17), End: at(19)}, ""},
		{"its link stalled", &fault{Kind: fLinkStall, Target: "postgres", Start: at(17), End: at(19)}, ""},
		{"a broker's link stalled", &fault{Kind: fLinkStall, Target: "modern", Start: at(17), End: at(19)}, "d"},
		{"paused long before", &fault{Kind: fPgPause, Target: "postgres", Start: at(1), End: at(2)}, "d"},
	} {
		v := newVerdict()
		v.store = "postgres"
		v.faults = []*fault{c.fault}
		v.ops = []*op{{ID: 1, Kind: "provision", Broker: "modern", Instance: "i1", Start: at(20), End: at(21), Status: 503,
			Desc: "the gateway's operation state is unavailable"}}
		v.check5xx()
		if got := rules(v); got != c.want {
			t.Errorf("%s: rules %q, want %q", c.name, got, c.want)
		}
	}
}
