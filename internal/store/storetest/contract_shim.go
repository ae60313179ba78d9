package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// testShim: a lock carries the operation the gateway emulates for a
// synchronous broker (the async shim) through Update, Get, List and a
// restart, whole; an emulated operation that does not validate changes
// nothing.
func testShim(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	l := MustAcquire(t, s, Lock("i1", "owner-1", time.Minute))

	shimmed := l
	shimmed.Async, shimmed.Operation, shimmed.Deadline = true, "osb-gateway-provision-1", T0.Add(time.Hour)
	shimmed.Shim = store.Shim{State: store.StateInProgress, Replica: "replica-a", CallEnds: T0.Add(2 * time.Minute).Add(time.Nanosecond)}
	WantErr(t, "Update to an emulated operation", s.Update(ctx, shimmed), nil)
	want := shimmed
	want.Shim.CallEnds = T0.Add(2 * time.Minute) // to the microsecond
	if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(want, got) {
		t.Errorf("Get = %v; diff (-want +got):\n%s", err, cmp.Diff(want, got))
	}

	ended := want
	ended.Shim = store.Shim{State: store.StateFailed, Description: "the broker said \"no\" ☃", Replica: "replica-a",
		CallEnds: want.Shim.CallEnds, BrokerAsync: true, BrokerOperation: strings.Repeat("b", store.MaxOperationLen), Hold: true,
		Challenged: T0.Add(3 * time.Minute)}
	WantErr(t, "Update to an outcome", s.Update(ctx, ended), nil)
	if got, err := s.List(ctx, store.ListFilter{Broker: "b1", InstanceID: "i1"}); err != nil || len(got) != 1 || !cmp.Equal(ended, got[0]) {
		t.Errorf("List = %v, %v; want [%+v]", got, err, ended)
	}
	if b.Reopen != nil {
		s = b.Reopen(t, s, osbtest.NewClock(T0).Now)
		if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(ended, got) {
			t.Errorf("Get after a restart = %v; diff (-want +got):\n%s", err, cmp.Diff(ended, got))
		}
	}

	for name, sh := range map[string]store.Shim{
		"unknown state":             {State: "pending"},
		"fields without a state":    {Replica: "replica-a"},
		"broker operation too long": {State: store.StateInProgress, BrokerOperation: strings.Repeat("b", store.MaxOperationLen+1)},
		"call ends after year 9999": {State: store.StateInProgress, CallEnds: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		bad := ended
		bad.Shim = sh
		WantErr(t, "Update with "+name, s.Update(ctx, bad), store.ErrInvalid)
		bad.Key, bad.InstanceID = store.LockKey("b1", "i2"), "i2"
		_, err := s.Acquire(ctx, bad)
		WantErr(t, "Acquire with "+name, err, store.ErrInvalid)
	}
	if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(ended, got) {
		t.Errorf("Get after invalid updates = %v; diff (-want +got):\n%s", err, cmp.Diff(ended, got))
	}
}
