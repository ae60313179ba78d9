package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/clockjump"
)

// TestPlanMoreWhereTheyApply: the kinds of faults_more.go are drawn only
// where they apply (a Redis restart only on redis, at most once; a
// partition only with a networked store and two replicas or more; a full
// disk only on bolt), each aimed at a replica that exists.
func TestPlanMoreWhereTheyApply(t *testing.T) {
	all := []string{fRedisRestart, fStoreCut, fClockJump, fDiskFull, fRolling, fReload}
	for _, c := range []struct {
		store    string
		replicas int
		want     []string
	}{
		{"bolt", 1, []string{fClockJump, fDiskFull, fRolling, fReload}},
		{"redis", 1, []string{fRedisRestart, fClockJump, fRolling, fReload}},
		{"redis", 3, []string{fRedisRestart, fStoreCut, fClockJump, fRolling, fReload}},
		{"postgres", 2, []string{fStoreCut, fClockJump, fRolling, fReload}},
	} {
		seen := map[string]int{}
		for seed := range uint64(5) {
			for _, f := range planMore(seed, 20*time.Minute, c.store, c.replicas, 2500*time.Millisecond) {
				seen[f.Kind]++
				if strings.HasPrefix(f.Target, "gw") && f.Target >= fmt.Sprintf("gw%d", c.replicas) {
					t.Errorf("%s ×%d: %s aimed at %s", c.store, c.replicas, f, f.Target)
				}
				if f.Kind == fClockJump && (f.Offset.Abs() < 30*time.Second || f.Offset.Abs() > 10*time.Minute) {
					t.Errorf("%s: a step outside ±30s to ±10m", f)
				}
			}
			if n := len(slices.DeleteFunc(planMore(seed, 20*time.Minute, c.store, c.replicas, 2500*time.Millisecond),
				func(f *fault) bool { return f.Kind != fRedisRestart })); n > 1 {
				t.Errorf("%s seed %d: %d Redis restarts in a run, want at most 1", c.store, seed, n)
			}
		}
		for _, k := range all {
			if got := seen[k] > 0; got != slices.Contains(c.want, k) {
				t.Errorf("%s ×%d: %s drawn %d times in 5 seeds of 20 minutes, want drawn: %v", c.store, c.replicas, k, seen[k], !got)
			}
		}
	}
}

// TestPlanAllKeepsPlan: the other kinds' schedule of a seed is what plan
// drew before these kinds came, in the same order.
func TestPlanAllKeepsPlan(t *testing.T) {
	old := plan(7, 10*time.Minute, "redis", 2, 4, []string{"modern", "legacy"}, 2500*time.Millisecond)
	all := planAll(7, 10*time.Minute, "redis", 2, 4, []string{"modern", "legacy"}, 2500*time.Millisecond)
	more := planMore(7, 10*time.Minute, "redis", 2, 2500*time.Millisecond)
	if len(all) != len(old)+len(more) || len(more) < 20 {
		t.Fatalf("%d faults, want %d + %d (at least 20 more)", len(all), len(old), len(more))
	}
	var kept []string
	for i, f := range all {
		if f.N != i+1 || (i > 0 && f.At < all[i-1].At) {
			t.Fatalf("fault %d numbered %d at %s, after %s", i, f.N, f.At, all[max(i-1, 0)].At)
		}
		if !slices.Contains([]string{fRedisRestart, fStoreCut, fClockJump, fDiskFull, fRolling, fReload}, f.Kind) {
			kept = append(kept, fmt.Sprint(f.At, f.Kind, f.Target, f.Detail, f.For))
		}
	}
	for i, f := range old {
		if want := fmt.Sprint(f.At, f.Kind, f.Target, f.Detail, f.For); kept[i] != want {
			t.Fatalf("fault %d of plan is %s, want %s", i, kept[i], want)
		}
	}
}

// TestStoreFaultedByReplica: a partition of one replica excuses a 503
// that blames the store on that replica's calls, not on another's; a full
// disk and a Redis restart excuse it as any store outage does.
func TestStoreFaultedByReplica(t *testing.T) {
	for _, c := range []struct {
		name    string
		store   string
		fault   *fault
		replica int
		want    string
	}{
		{"its own replica cut off", "redis", &fault{Kind: fStoreCut, Target: "gw1", Start: at(17), End: at(19)}, 1, ""},
		{"another replica cut off", "redis", &fault{Kind: fStoreCut, Target: "gw1", Start: at(17), End: at(19)}, 0, "d"},
		{"cut off long before", "redis", &fault{Kind: fStoreCut, Target: "gw1", Start: at(1), End: at(2)}, 1, "d"},
		{"redis restarting", "redis", &fault{Kind: fRedisRestart, Target: "redis", Start: at(18), End: at(19)}, 0, ""},
		{"a restart that failed", "redis", &fault{Kind: fRedisRestart, Target: "redis", Start: at(18), End: at(19), Err: "pid 7 had already exited"}, 0, "d"},
		{"bolt's disk full", "bolt", &fault{Kind: fDiskFull, Target: "bolt", Start: at(18), End: at(25)}, 0, ""},
		{"a clock step", "bolt", &fault{Kind: fClockJump, Target: "gw0", Start: at(18), End: at(25)}, 0, "d"},
		{"a rolling restart", "redis", &fault{Kind: fRolling, Target: "all", Start: at(18), End: at(25)}, 0, "d"},
	} {
		v := newVerdict()
		v.store = c.store
		v.faults = []*fault{c.fault}
		v.ops = []*op{{ID: 1, Kind: "provision", Broker: "modern", Instance: "i1", Replica: c.replica, Start: at(20), End: at(21), Status: 503,
			Desc: "the gateway's operation state is unavailable"}}
		v.check5xx()
		if got := rules(v); got != c.want {
			t.Errorf("%s: rules %q, want %q", c.name, got, c.want)
		}
	}
}

// TestCheckerForgotten: a Redis restart that forgot the store excuses
// what it forgot, of the instances it held (an operation on them began
// before the kill), and nothing of those whose operations all began after
// it (refused until the acceptance, then written to the new store); (e)
// only while the calls in flight at the kill may have run, and what
// happened at a time ((e), (g)) only after the kill.
func TestCheckerForgotten(t *testing.T) {
	wipe := &fault{N: 9, Kind: fRedisRestart, Target: "redis", Start: at(100), End: at(110)}
	v := newVerdict()
	v.faults = []*fault{wipe}
	v.ops = []*op{
		{ID: 1, Kind: "provision", Broker: "legacy", Instance: "before", Start: at(50), End: at(51), Status: 201},
		{ID: 2, Kind: "deprovision", Broker: "legacy", Instance: "before", Start: at(112), End: at(113), Status: 410},
		{ID: 3, Kind: "provision", Broker: "legacy", Instance: "after", Start: at(111), End: at(112), Status: 201},
		{ID: 4, Kind: "provision", Broker: "legacy", Instance: "during", Start: at(100.5), End: at(101), Status: 503},
		{ID: 5, Kind: "provision", Broker: "legacy", Instance: "during", Start: at(111), End: at(112), Status: 201},
	}
	v.violations = []violation{
		{Rule: "b", Instance: "before", At: at(113)},
		{Rule: "h", Instance: "during", At: at(200)},
		{Rule: "b", Instance: "after", At: at(113)},
		{Rule: "e", Instance: "before", At: at(112)},
		{Rule: "e", Instance: "before", At: at(100 + syncLockBound.Seconds() + 1)},
		{Rule: "e", Instance: "before", At: at(99)},
		{Rule: "g", Instance: "before", At: at(99)},
		{Rule: "g", Instance: "before", At: at(101)},
		{Rule: "d", Instance: "before", At: at(112)},
		{Rule: "c", Instance: "before", At: at(112)},
	}
	v.excuseForgotten()
	var left []string
	for _, x := range v.violations {
		left = append(left, x.Rule+" "+x.Instance)
	}
	want := []string{"h during", "b after", "e before", "e before", "g before", "d before", "c before"}
	if !slices.Equal(left, want) {
		t.Errorf("violations left %q, want %q", left, want)
	}
	if len(v.notes) != 3 {
		t.Errorf("%d notes, want 3: %q", len(v.notes), v.notes)
	}

	v.faults[0].Err = "redis restarted as pid 0"
	v.violations = []violation{{Rule: "b", Instance: "before", At: at(111)}}
	if v.excuseForgotten(); len(v.violations) != 1 {
		t.Error("a restart that did not happen excused a violation")
	}
}

// TestCheckerRefusedWhileLost is (i): a mutating call that began after
// the kill of a Redis restarting empty and ended before the operator
// accepted the loss must not succeed (the gateway went on with the empty
// store), save one sharing the answer of an identical call in flight
// since before the kill; a 503 meanwhile, a success across the
// acceptance or before the kill, and reads are no violation.
func TestCheckerRefusedWhileLost(t *testing.T) {
	wipe := &fault{N: 3, Kind: fRedisRestart, Target: "redis", Start: at(100), End: at(110)}
	v := newVerdict()
	v.faults = []*fault{wipe}
	v.ops = []*op{
		{ID: 1, Tenant: "cf1", Kind: "provision", Instance: "ok-before", Start: at(98), End: at(99), Status: 201},
		{ID: 2, Tenant: "cf1", Kind: "provision", Instance: "refused", Start: at(101), End: at(102), Status: 503},
		{ID: 3, Tenant: "cf1", Kind: "update", Instance: "let-through", Start: at(104), End: at(105), Status: 202},
		{ID: 4, Tenant: "cf1", Kind: "provision", Instance: "across", Start: at(109), End: at(111), Status: 201},
		{ID: 5, Tenant: "cf1", Kind: "get", Instance: "read", Start: at(104), End: at(105), Status: 200},
		{ID: 6, Tenant: "cf2", Kind: "bind", Instance: "shared", Binding: "b", Start: at(99), End: at(103), Status: 201},
		{ID: 7, Tenant: "cf2", Kind: "bind", Instance: "shared", Binding: "b", Start: at(102), End: at(103), Status: 201},
	}
	v.checkRefusedWhileLost()
	if got := rules(v); got != "i" || v.violations[0].Instance != "let-through" {
		t.Errorf("violations %v, want (i) of let-through alone", v.violations)
	}
	wipe.Err = "redis restarted as pid 0"
	v.violations = nil
	if v.checkRefusedWhileLost(); len(v.violations) != 0 {
		t.Errorf("a restart that did not happen: %v", v.violations)
	}
}

// TestSetFileSizeLimit: the limit lands on the process, and lifts again.
func TestSetFileSizeLimit(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	limits := func() string {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(l, "Max file size") {
				return strings.Join(strings.Fields(l)[3:5], " ")
			}
		}
		return ""
	}
	if err := setFileSizeLimit(cmd.Process.Pid, 4096); err != nil {
		t.Fatal(err)
	}
	if got := limits(); got != "4096 unlimited" {
		t.Errorf("limits %q, want 4096 unlimited", got)
	}
	if err := setFileSizeLimit(cmd.Process.Pid, unlimited); err != nil {
		t.Fatal(err)
	}
	if got := limits(); got != "unlimited unlimited" {
		t.Errorf("limits %q after lifting, want unlimited", got)
	}
}

// TestTouchConfig: the file changes by its last comment only, each time.
func TestTouchConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gw0.yaml")
	if err := os.WriteFile(path, []byte("listen: {address: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 17} {
		if err := touchConfig(path, n); err != nil {
			t.Fatal(err)
		}
	}
	if raw, _ := os.ReadFile(path); string(raw) != "listen: {address: x}\n# reload 17\n" {
		t.Errorf("file %q", raw)
	}
}

func TestReloadCount(t *testing.T) {
	in := "# HELP x\nosb_gateway_config_reload_total{result=\"failure\"} 2\nosb_gateway_config_reload_total{result=\"success\"} 5\n"
	if n, err := reloadCount(strings.NewReader(in)); n != 5 || err != nil {
		t.Errorf("reloadCount = %v, %v; want 5", n, err)
	}
	if n, err := reloadCount(strings.NewReader("go_goroutines 7\n")); n != 0 || err != nil {
		t.Errorf("reloadCount without a reload = %v, %v; want 0", n, err)
	}
}

// TestClockTagBuilds: the gateway builds with the campaign's tag, and the
// tag moves its wall clock by the file's offset (internal/clockjump's
// tests under the tag).
func TestClockTagBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the gateway")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-tags", baseTags, "-o", filepath.Join(t.TempDir(), "osb-gateway"), "./cmd/osb-gateway")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags %s: %v\n%s", baseTags, err, out)
	}
	check := exec.Command("go", "test", "-count=1", "-tags", baseTags, "-run", "^TestOffset$", "./internal/clockjump")
	check.Dir = root
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("-tags %s: %v\n%s", baseTags, err, out)
	}
}

// TestCheckerLockAgesThroughAClockStep: a lock written while its gateway's
// clock stood 9 minutes back has a Started 9 minutes early; its age is
// counted from when the audit first saw it, and only then.
func TestCheckerLockAgesThroughAClockStep(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault *fault
		want  string
	}{
		{"a step back then", &fault{Kind: fClockJump, Target: "gw0", Offset: -9 * time.Minute, Start: at(590), End: at(610)}, ""},
		{"a step forward then", &fault{Kind: fClockJump, Target: "gw0", Offset: 9 * time.Minute, Start: at(590), End: at(610)}, "c"},
		{"a step back long before", &fault{Kind: fClockJump, Target: "gw0", Offset: -9 * time.Minute, Start: at(100), End: at(120)}, "c"},
		{"a step back that failed", &fault{Kind: fClockJump, Target: "gw0", Offset: -9 * time.Minute, Start: at(590), End: at(610), Err: "not acknowledged"}, "c"},
	} {
		v := newVerdict()
		v.faults = []*fault{c.fault}
		v.audit = []*seenLock{{adminLock: adminLock{Key: "i1", Broker: "modern", InstanceID: "i1", Kind: "update", Started: at(60)},
			First: at(600), Last: at(606)}}
		v.checkLockAges()
		if got := rules(v); got != c.want {
			t.Errorf("%s: rules %q, want %q", c.name, got, c.want)
		}
	}
}

// TestSkipKinds: -skip leaves out the kinds named, and only those.
func TestSkipKinds(t *testing.T) {
	all := planAll(2, 10*time.Minute, "redis", 2, 4, []string{"modern", "legacy"}, 2500*time.Millisecond)
	n := len(all)
	left := skipKinds(all, fClockJump+","+fRedisPause)
	for i, f := range left {
		if f.Kind == fClockJump || f.Kind == fRedisPause || f.N != i+1 {
			t.Fatalf("fault %d left: %s", i, f)
		}
	}
	if len(left) >= n || len(left) < n/2 {
		t.Errorf("%d of %d faults left", len(left), n)
	}
}

// TestOwnLinks: each replica reaches the store through a link of its own
// in front of the shared one; cutting one replica's leaves the other's.
func TestOwnLinks(t *testing.T) {
	echo := echoServer(t)
	shared, err := newLink("shared", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	c := &cluster{store: "redis", storeLink: shared}
	dir := t.TempDir()
	var gws []*gatewayProc
	for i := range 2 {
		g := &gatewayProc{proc: proc{name: fmt.Sprintf("gw%d", i)}, config: filepath.Join(dir, fmt.Sprintf("gw%d.yaml", i))}
		state, err := c.ownLinks(g, fmt.Sprintf("{backend: redis, redis: {addrs: [%q]}}", shared.Addr()))
		if err != nil {
			t.Fatal(err)
		}
		defer g.storeLink.Close()
		if want := fmt.Sprintf("{backend: redis, redis: {addrs: [%q]}}", g.storeLink.Addr()); state != want {
			t.Errorf("%s: state %s, want %s", g.name, state, want)
		}
		if want := clockjump.EnvFile + "=" + g.config + ".clock"; len(g.env) != 1 || g.env[0] != want {
			t.Errorf("%s: env %q, want %s", g.name, g.env, want)
		}
		gws = append(gws, g)
	}
	roundTrip := func(l *link) error {
		conn, err := net.DialTimeout("tcp", l.Addr(), time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write([]byte("PING\n")); err != nil {
			return err
		}
		buf := make([]byte, 5)
		_, err = io.ReadFull(conn, buf)
		return err
	}
	gws[1].storeLink.cut(true)
	if err := roundTrip(gws[0].storeLink); err != nil {
		t.Errorf("gw0 cut off with gw1: %v", err)
	}
	if err := roundTrip(gws[1].storeLink); err == nil {
		t.Error("gw1 reached the store through its cut link")
	}
	gws[1].storeLink.heal()
	if err := roundTrip(gws[1].storeLink); err != nil {
		t.Errorf("gw1 after the heal: %v", err)
	}
}
