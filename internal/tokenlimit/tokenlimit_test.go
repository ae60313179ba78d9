package tokenlimit

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

func TestAddr(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.1:4711":              "192.0.2.1",
		"[::ffff:192.0.2.1]:4711":     "192.0.2.1",
		"[2001:db8:1:2:3:4:5:6]:4711": "2001:db8:1:2::",
		"@":                           "invalid IP",
	} {
		if got := Addr(&http.Request{RemoteAddr: remote}).String(); got != want {
			t.Errorf("Addr(%q) = %s, want %s", remote, got, want)
		}
	}
}

// An address has Burst refusals, then one every Window/Burst; a success
// gives its attempt back; the first refusal over the limit in a Window is
// the one to log.
func TestLimiter(t *testing.T) {
	clk := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := New(clk.Now)
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	for i := range Burst + 3 {
		at, _, ok := l.Begin(a)
		if !ok {
			t.Fatalf("attempt %d refused, want %d in a row (successes cost nothing)", i, Burst)
		}
		if i >= 3 { // the first three succeed
			continue
		}
		at.Succeeded()
	}
	_, ref, ok := l.Begin(a)
	if ok || ref.Wait != Window/Burst || ref.RetryAfter() != "6" || !ref.Log || ref.Unlogged != 0 {
		t.Fatalf("past the limit: ok %v %+v, want refused for 6s and logged", ok, ref)
	}
	if _, ref, _ := l.Begin(a); ref.Log {
		t.Error("a second refusal in the window is to be logged")
	}
	if _, _, ok := l.Begin(b); !ok {
		t.Error("another address is limited")
	}
	clk.Advance(Window)
	_, ref, ok = l.Begin(a)
	if !ok {
		t.Fatal("an attempt did not come back")
	}
	for range Burst - 1 {
		l.Begin(a)
	}
	if _, ref, ok = l.Begin(a); ok || !ref.Log || ref.Unlogged != 1 {
		t.Errorf("a window later: ok %v %+v, want logged again counting 1 not logged", ok, ref)
	}
}
