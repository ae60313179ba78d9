package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// testCatalogContract lists the catalog records' contract tests;
// Contract runs them with the rest.
var testCatalogContract = []struct {
	name string
	fn   func(t *testing.T, b Backend)
}{
	{"CatalogsPutGet", testCatalogsPutGet},
	{"CatalogsIfAccepted", testCatalogsIfAccepted},
	{"CatalogsInvalid", testCatalogsInvalid},
	{"CatalogsRaceOneWinner", testCatalogsRaceOneWinner},
	{"CatalogsRestart", testCatalogsRestart},
}

// testCatalogs is broker's record with an accepted catalog and a latest
// one that drifted from it.
func testCatalogs(broker string) store.BrokerCatalogs {
	return store.BrokerCatalogs{
		Broker:     broker,
		Accepted:   store.KeptCatalog{Hash: "h1", At: T0.Add(123456789 * time.Nanosecond), Body: []byte(`{"services":[]}` + "\n")},
		AcceptedBy: "gateway",
		Latest:     store.KeptCatalog{Hash: "h2", At: T0.Add(time.Hour), Body: []byte(`{"services":[{"id":"s"}]}`)},
		Changes: []store.CatalogChange{{Kind: "plan_removed", Service: "svc", Plan: "small", OldID: "p1", LiveInstances: 3,
			Detail: "plan small of service svc is gone"}},
		Checked: T0.Add(time.Hour),
		Held:    true,
		Notes:   []string{"no parameters stored"},
	}
}

func testCatalogsPutGet(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	if _, err := s.GetCatalogs(ctx, "b1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetCatalogs of nothing: %v, want ErrNotFound", err)
	}
	if got, err := s.ListCatalogs(ctx); err != nil || len(got) != 0 {
		t.Fatalf("ListCatalogs of nothing = %v, %v", got, err)
	}
	want := testCatalogs("b1")
	if err := s.PutCatalogs(ctx, want, ""); err != nil {
		t.Fatal(err)
	}
	want.Accepted.At = want.Accepted.At.Truncate(time.Microsecond)
	got, err := s.GetCatalogs(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("GetCatalogs (-want +got):\n%s", d)
	}
	got.Accepted.Body[0] = 'X' // the caller's copy
	if again, _ := s.GetCatalogs(ctx, "b1"); again.Accepted.Body[0] != '{' {
		t.Error("a caller's change reached the stored record")
	}
	other := testCatalogs("a0")
	other.Latest, other.Changes, other.Held, other.Notes = store.KeptCatalog{}, nil, false, nil
	if err := s.PutCatalogs(ctx, other, ""); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListCatalogs(ctx)
	if err != nil || len(list) != 2 || list[0].Broker != "a0" || list[1].Broker != "b1" {
		t.Fatalf("ListCatalogs = %+v, %v; want a0, b1", list, err)
	}
	if d := cmp.Diff(want, list[1]); d != "" {
		t.Errorf("ListCatalogs[1] (-want +got):\n%s", d)
	}
	if err := s.DeleteCatalogs(ctx, "a0"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCatalogs(ctx, "a0"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteCatalogs twice: %v, want ErrNotFound", err)
	}
	if list, _ := s.ListCatalogs(ctx); len(list) != 1 {
		t.Errorf("ListCatalogs after delete: %d records, want 1", len(list))
	}
}

func testCatalogsIfAccepted(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	bc := testCatalogs("b1")
	if err := s.PutCatalogs(ctx, bc, "h0"); !errors.Is(err, store.ErrChanged) {
		t.Fatalf("PutCatalogs of a new broker expecting h0: %v, want ErrChanged", err)
	}
	if _, err := s.GetCatalogs(ctx, "b1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused put stored something: %v", err)
	}
	if err := s.PutCatalogs(ctx, bc, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCatalogs(ctx, bc, ""); !errors.Is(err, store.ErrChanged) {
		t.Errorf("PutCatalogs expecting no accepted catalog over h1: %v, want ErrChanged", err)
	}
	next := bc
	next.Accepted, next.AcceptedBy, next.Changes, next.Held = bc.Latest, "alice", nil, false
	if err := s.PutCatalogs(ctx, next, "h1"); err != nil {
		t.Fatalf("accepting h2 over h1: %v", err)
	}
	stale := bc
	stale.Latest.Hash = "h3"
	if err := s.PutCatalogs(ctx, stale, "h1"); !errors.Is(err, store.ErrChanged) || !strings.Contains(err.Error(), "h2") {
		t.Errorf("a put expecting h1 after h2 was accepted: %v, want ErrChanged naming h2", err)
	}
	if got, _ := s.GetCatalogs(ctx, "b1"); got.Accepted.Hash != "h2" || got.AcceptedBy != "alice" {
		t.Errorf("after the refused put: accepted %q by %q, want h2 by alice", got.Accepted.Hash, got.AcceptedBy)
	}
}

func testCatalogsInvalid(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	tooMany := testCatalogs("b1")
	tooMany.Changes = make([]store.CatalogChange, store.MaxCatalogChanges+1)
	farTime := testCatalogs("b1")
	farTime.Checked = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, bc := range map[string]store.BrokerCatalogs{
		"no broker":    testCatalogs(""),
		"NUL":          testCatalogs("b\x001"),
		"long name":    testCatalogs(strings.Repeat("b", store.MaxNameLen+1)),
		"many changes": tooMany,
		"far time":     farTime,
	} {
		if err := s.PutCatalogs(ctx, bc, ""); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: PutCatalogs = %v, want ErrInvalid", name, err)
		}
	}
	if list, _ := s.ListCatalogs(ctx); len(list) != 0 {
		t.Errorf("invalid records stored: %+v", list)
	}
}

// testCatalogsRaceOneWinner: of replicas that read the same accepted hash
// and put at once, exactly one wins.
func testCatalogsRaceOneWinner(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	if err := s.PutCatalogs(ctx, testCatalogs("b1"), ""); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bc := testCatalogs("b1")
			bc.Accepted.Hash = "next-" + string(rune('a'+i))
			errs[i] = s.PutCatalogs(ctx, bc, "h1")
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrChanged):
			t.Errorf("PutCatalogs: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d puts won, want 1", won)
	}
}

func testCatalogsRestart(t *testing.T, b Backend) {
	if b.Reopen == nil {
		t.Skip("nothing persists")
	}
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	want := testCatalogs("b1")
	if err := s.PutCatalogs(ctx, want, ""); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s, c.Now)
	got, err := s.GetCatalogs(ctx, "b1")
	want.Accepted.At = want.Accepted.At.Truncate(time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("after restart (-want +got):\n%s", d)
	}
	if err := s.PutCatalogs(ctx, want, "h1"); err != nil {
		t.Errorf("put expecting h1 after restart: %v", err)
	}
}
