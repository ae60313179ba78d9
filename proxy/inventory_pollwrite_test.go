package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// writeFailStore is a store whose inventory writes fail while failing is
// set, and whose reads and locks answer: a store that takes no writes
// (a full disk, a Redis whose replicas do not acknowledge) but reads.
type writeFailStore struct {
	store.Store
	failing atomic.Bool
}

func (w *writeFailStore) PutInstance(ctx context.Context, in store.Instance) (store.Instance, error) {
	if w.failing.Load() {
		return store.Instance{}, fmt.Errorf("%w: injected: no write", store.ErrUnavailable)
	}
	return w.Store.PutInstance(ctx, in)
}

// TestPollEndingAnOperationKeepsItsRecordWhenTheWriteFails: a poll that
// ends an async provision while the store takes no inventory write keeps
// the operation's lock, and the retry queue writes the record before it
// releases the lock, so the inventory never says "in progress" of an
// instance the platform was told succeeded, with no lock left to settle
// it (the campaign's disk-full on bolt: the record was lost).
func TestPollEndingAnOperationKeepsItsRecordWhenTheWriteFails(t *testing.T) {
	var wf *writeFailStore
	e := newInvEnvStore(t, samplebroker.Options{}, "2.17", "", slog.New(slog.DiscardHandler), func(st store.Store) store.Store {
		wf = &writeFailStore{Store: st}
		return wf
	})
	ctx := context.Background()
	body := `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanAsyncID + `","organization_guid":"o","space_guid":"s"}`
	if st, b := e.call(t, "2.15", "PUT", "/v2/service_instances/i-3?accepts_incomplete=true", body); st != http.StatusAccepted {
		t.Fatalf("provision: %d %s", st, b)
	}
	e.clock.Advance(2 * time.Minute) // the broker finishes
	wf.failing.Store(true)
	if st, b := e.call(t, "2.15", "GET", "/v2/service_instances/i-3/last_operation", ""); st != http.StatusOK || !strings.Contains(b, "succeeded") {
		t.Fatalf("poll: %d %s", st, b)
	}
	if ls, err := e.st.List(ctx, store.ListFilter{}); err != nil || len(ls) != 1 {
		t.Fatalf("with the record not written, the operation's lock is kept until it is: %d locks, %v", len(ls), err)
	}
	wf.failing.Store(false)
	waitFor(t, func() bool {
		e.g.guard.Retry.RetryNow()
		ls, err := e.st.List(ctx, store.ListFilter{})
		return err == nil && len(ls) == 0
	})
	in, err := e.st.GetInstance(ctx, "b", "i-3")
	if err != nil || in.LastOperation.State != store.StateSucceeded || in.LastOperation.Kind != store.KindProvision {
		t.Errorf("once the store takes writes again, the record says the provision succeeded: %+v, %v", in.LastOperation, err)
	}
}
