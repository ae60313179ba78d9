package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// testShim: a lock carries the operation the gateway emulates for a
// synchronous broker (the async shim) through Update, Get, List and a
// restart, whole; an emulated operation that does not validate changes
// nothing.
func testShim(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t, osbtest.NewClock(t0).Now)
	l := mustAcquire(t, s, testLock("i1", "owner-1", time.Minute))

	shimmed := l
	shimmed.Async, shimmed.Operation, shimmed.Deadline = true, "osb-gateway-provision-1", t0.Add(time.Hour)
	shimmed.Shim = Shim{State: StateInProgress, Replica: "replica-a", CallEnds: t0.Add(2 * time.Minute).Add(time.Nanosecond)}
	wantErr(t, "Update to an emulated operation", s.Update(ctx, shimmed), nil)
	want := shimmed
	want.Shim.CallEnds = t0.Add(2 * time.Minute) // to the microsecond
	if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(want, got) {
		t.Errorf("Get = %v; diff (-want +got):\n%s", err, cmp.Diff(want, got))
	}

	ended := want
	ended.Shim = Shim{State: StateFailed, Description: "the broker said \"no\" ☃", Replica: "replica-a",
		CallEnds: want.Shim.CallEnds, BrokerAsync: true, BrokerOperation: strings.Repeat("b", MaxOperationLen), Hold: true,
		Challenged: t0.Add(3 * time.Minute)}
	wantErr(t, "Update to an outcome", s.Update(ctx, ended), nil)
	if got, err := s.List(ctx, ListFilter{Broker: "b1", InstanceID: "i1"}); err != nil || len(got) != 1 || !cmp.Equal(ended, got[0]) {
		t.Errorf("List = %v, %v; want [%+v]", got, err, ended)
	}
	if b.reopen != nil {
		s = b.reopen(t, s, osbtest.NewClock(t0).Now)
		if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(ended, got) {
			t.Errorf("Get after a restart = %v; diff (-want +got):\n%s", err, cmp.Diff(ended, got))
		}
	}

	for name, sh := range map[string]Shim{
		"unknown state":             {State: "pending"},
		"fields without a state":    {Replica: "replica-a"},
		"broker operation too long": {State: StateInProgress, BrokerOperation: strings.Repeat("b", MaxOperationLen+1)},
		"call ends after year 9999": {State: StateInProgress, CallEnds: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		bad := ended
		bad.Shim = sh
		wantErr(t, "Update with "+name, s.Update(ctx, bad), ErrInvalid)
		bad.Key, bad.InstanceID = LockKey("b1", "i2"), "i2"
		_, err := s.Acquire(ctx, bad)
		wantErr(t, "Acquire with "+name, err, ErrInvalid)
	}
	if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(ended, got) {
		t.Errorf("Get after invalid updates = %v; diff (-want +got):\n%s", err, cmp.Diff(ended, got))
	}
}
