package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// Rule (h): the brokers' holdings against the inventory.
func TestCheckerInventory(t *testing.T) {
	v := newVerdict()
	m := v.brokers["modern"]
	// i1: held, at the broker, recorded: fine.
	v.held["i1"], m.instances["i1"], v.gw.inventory["modern i1"] = "modern", true, true
	// i2: held and at the broker, not recorded (drop-inventory-write): (h).
	v.held["i2"], m.instances["i2"] = "modern", true
	// i3: recorded, deleted at the broker by a deprovision the platform
	// saw succeed (keep-deleted): (h).
	v.gw.inventory["modern i3"], v.gw.inventory["modern i3/b1"] = true, true // its binding counts with it
	// i4: recorded, gone from the broker, its last deletion a 504: the
	// record stays whole, as documented. A note.
	v.gw.inventory["modern i4"] = true
	// i5: a create that failed stays recorded as failed: no resource.
	v.gw.inventory["modern i5"] = false
	// i6/b1: held binding, at the broker, an orphan names it: fine.
	v.held["i6/b1"], m.bindings["i6/b1"], v.gw.orphans["modern i6/b1"] = "modern", true, true
	// i7: a 202 deletion whose poll said succeeded, still recorded: (h).
	v.gw.inventory["modern i7"] = true
	v.ops = []*op{
		{ID: 1, Kind: "deprovision", Broker: "modern", Instance: "i3", Start: at(1), End: at(1.1), Status: 200},
		{ID: 2, Kind: "deprovision", Broker: "modern", Instance: "i4", Start: at(2), End: at(6), Status: 504},
		{ID: 3, Kind: "deprovision", Broker: "modern", Instance: "i7", Start: at(3), End: at(3.1), Status: 202},
		{ID: 4, Kind: "poll", Broker: "modern", Instance: "i7", Start: at(4), End: at(4.1), Status: 200, State: "succeeded", Of: 3},
	}
	v.checkInventory()
	if got := rules(v); got != "h,h,h" {
		t.Fatalf("rules = %q, want h,h,h:\n%v", got, v.violations)
	}
	for i, want := range []string{"modern i2: a platform holds it", "modern i3: the inventory records it", "modern i7: the inventory records it"} {
		if !strings.Contains(v.violations[i].What, want) {
			t.Errorf("violation %d = %s, want %q", i, v.violations[i].What, want)
		}
	}
	if len(v.notes) != 1 || !strings.Contains(v.notes[0], "modern i4") {
		t.Errorf("notes = %q, want i4's deletion in doubt", v.notes)
	}
}

// A platform that does not mitigate leaves what it made to the gateway:
// untracked, (b); recorded because the gateway delivered the success
// before the platform went away, a note.
func TestCheckerHoldingsCareless(t *testing.T) {
	v := newVerdict()
	v.careless[5] = styleCrashes
	m := v.brokers["modern"]
	m.instances["i1"], m.instances["i2"], m.instances["i3"] = true, true, true
	v.gw.inventory["modern i2"] = true // delivered before the RST
	v.gw.inventory["modern i3"] = true // but by a platform that mitigates
	v.ops = []*op{
		{Platform: 5, Kind: "provision", Broker: "modern", Instance: "i1", Start: at(1), End: at(2), Mode: modeHangUp},
		{Platform: 5, Kind: "provision", Broker: "modern", Instance: "i2", Start: at(1), End: at(2), Mode: modeHangUp},
		{Platform: 0, Kind: "provision", Broker: "modern", Instance: "i3", Start: at(1), End: at(2), Mode: modeHangUp},
	}
	v.checkHoldings()
	if got := rules(v); got != "b,b" {
		t.Fatalf("rules = %q, want b,b (i1 and i3):\n%v", got, v.violations)
	}
	if len(v.notes) != 1 || !strings.Contains(v.notes[0], "modern i2") || !strings.Contains(v.notes[0], styleCrashes) {
		t.Errorf("notes = %q, want i2's", v.notes)
	}
}

// The views are read once the store's documented lag is over: its outage
// plus 5 s after it ended.
func TestInventoryCaughtUp(t *testing.T) {
	faults := []*fault{
		{Kind: fRedisPause, Target: "redis", Start: at(10), End: at(13)},
		{Kind: fLinkStall, Target: "redis", Start: at(20), End: at(21)},
		{Kind: fRedisPause, Target: "redis", Start: at(30), End: at(60), Err: "no such process"}, // never happened
		{Kind: fBrokerCrash, Target: "modern", Start: at(40), End: at(49)},                       // not the store's
	}
	if got, want := inventoryCaughtUp(faults, "redis"), at(27); !got.Equal(want) {
		t.Errorf("caught up at %s, want %s (21 s + 1 s + 5 s)", got.Format(time.TimeOnly), want.Format(time.TimeOnly))
	}
	if got := inventoryCaughtUp(faults, "bolt"); !got.IsZero() {
		t.Errorf("bolt, never faulted: caught up at %s, want at once", got)
	}
}

// (d) is excused only by a fault on the broker and endpoint of the call
// that fired while it ran, or a crash or link fault that really happened.
func TestChecker5xxNarrowed(t *testing.T) {
	o := &op{Kind: "provision", Broker: "modern", Instance: "i1", Start: at(20), End: at(20.5), Status: 500, Desc: "injected fault: status 500"}
	cases := []struct {
		name  string
		fault *fault
		want  string
	}{
		{"fired on its endpoint", &fault{Kind: fBrokerError, Target: "modern", Endpoint: "provision", Start: at(15), End: at(25), Fired: []time.Time{at(20.1)}}, ""},
		{"armed, never fired", &fault{Kind: fBrokerError, Target: "modern", Endpoint: "provision", Start: at(15), End: at(25)}, "d"},
		{"fired on another endpoint", &fault{Kind: fBrokerError, Target: "modern", Endpoint: "bind", Start: at(15), End: at(25), Fired: []time.Time{at(20.1)}}, "d"},
		{"fired long before", &fault{Kind: fBrokerError, Target: "modern", Endpoint: "provision", Start: at(5), End: at(25), Fired: []time.Time{at(6)}}, "d"},
		{"on the other broker", &fault{Kind: fBrokerError, Target: "legacy", Endpoint: "provision", Start: at(15), End: at(25), Fired: []time.Time{at(20.1)}}, "d"},
		{"a crash", &fault{Kind: fBrokerCrash, Target: "modern", Start: at(19), End: at(21)}, ""},
		{"a kill that killed nothing", &fault{Kind: fBrokerCrash, Target: "modern", Start: at(19), End: at(21), Err: "pid 7 had already exited"}, "d"},
	}
	for _, c := range cases {
		v := newVerdict()
		v.faults = []*fault{c.fault}
		v.ops = []*op{o}
		v.check5xx()
		if got := rules(v); got != c.want {
			t.Errorf("%s: rules = %q, want %q", c.name, got, c.want)
		}
	}
}

// A run's saved files check to the same verdict offline.
func TestRecheckFromSavedFiles(t *testing.T) {
	dir := t.TempDir()
	v := newVerdict()
	v.held["i2"] = "modern"
	v.brokers["modern"].instances["i2"], v.brokers["modern"].instances["i3"] = true, true
	v.careless[4] = styleGivesUp
	v.faults = []*fault{{N: 1, Kind: fBrokerError, Target: "modern", Endpoint: "provision", Start: at(1), End: at(11), Fired: []time.Time{at(2)}}}
	v.ops = []*op{{ID: 1, Platform: 4, Kind: "provision", Broker: "modern", Instance: "i3", Start: at(2), End: at(2.1), Status: 500, Desc: "injected fault: status 500"}}
	v.audit = []*seenLock{{adminLock: adminLock{Key: "modern/i9", Kind: "update", Started: at(0)}, Last: at(200)}}
	v.violations = []violation{{Rule: "c", What: "stuck"}}
	if err := save(dir, v); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"modern", "legacy"} {
		if err := writeFile(dir+"/"+b+".calls", ""); err != nil {
			t.Fatal(err)
		}
	}
	v.check()
	var out strings.Builder
	n, err := recheckDir(dir, &out)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(v.violations) || n != 4 { // c (stuck), b (i3), c (i9's lock), h (i2)
		t.Fatalf("rechecked %d violations, the run %d (%s), want 4:\n%s", n, len(v.violations), rules(v), out.String())
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
