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

// The contract of the console sessions (store.SessionStore): put, get,
// replace, expiry by the store's clock, logout, and a restart of a store
// that persists.

// testSessionContract lists the sessions' contract tests; Contract runs
// them on every backend.
var testSessionContract = []struct {
	name string
	fn   func(t *testing.T, b Backend)
}{
	{"SessionPutGet", testSessionPutGet},
	{"SessionExpiry", testSessionExpiry},
	{"SessionDelete", testSessionDelete},
	{"SessionInvalid", testSessionInvalid},
	{"SessionRestart", testSessionRestart},
}

// Session is a session of who until expires, tied to the token "t1".
func Session(who string, expires time.Time) store.Session {
	return store.Session{Who: who, Check: store.SessionKeyOf("check:t1"), Expires: expires}
}

// wantSession fails t unless s holds the session k as want (Created
// filled in with created).
func wantSession(t *testing.T, s store.Store, k store.SessionKey, want store.Session, created time.Time) {
	t.Helper()
	got, err := s.GetSession(context.Background(), k)
	if err != nil {
		t.Fatalf("GetSession: %v", err)
	}
	want.Created = created
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("GetSession (-want +got):\n%s", d)
	}
}

func testSessionPutGet(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	k1, k2 := store.SessionKeyOf("id-1"), store.SessionKeyOf("id-2")
	_, err := s.GetSession(ctx, k1)
	WantErr(t, "GetSession of nothing", err, store.ErrNotFound)

	a := Session("alice", T0.Add(8*time.Hour))
	if err := s.PutSession(ctx, k1, a); err != nil {
		t.Fatal(err)
	}
	wantSession(t, s, k1, a, T0)
	_, err = s.GetSession(ctx, k2)
	WantErr(t, "GetSession of another key", err, store.ErrNotFound)

	bob := Session("", T0.Add(time.Hour).Add(123*time.Nanosecond)) // stored to the microsecond
	bob.Created = T0.Add(-time.Minute)
	bob.Check[0] ^= 1
	if err := s.PutSession(ctx, k2, bob); err != nil {
		t.Fatal(err)
	}
	want := bob
	want.Expires = T0.Add(time.Hour)
	wantSession(t, s, k2, want, T0.Add(-time.Minute))
	wantSession(t, s, k1, a, T0) // untouched

	a.Who = strings.Repeat("é", store.MaxSessionWho/2) // replaced whole
	if err := s.PutSession(ctx, k1, a); err != nil {
		t.Fatal(err)
	}
	wantSession(t, s, k1, a, T0)
}

func testSessionExpiry(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	k, long := store.SessionKeyOf("id-1"), store.SessionKeyOf("id-2")
	if err := s.PutSession(ctx, k, Session("alice", T0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSession(ctx, long, Session("bob", T0.Add(3*time.Hour))); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour - time.Microsecond)
	if _, err := s.GetSession(ctx, k); err != nil {
		t.Fatalf("GetSession a microsecond before Expires: %v", err)
	}
	c.Advance(time.Microsecond)
	_, err := s.GetSession(ctx, k)
	WantErr(t, "GetSession at Expires", err, store.ErrNotFound)
	// A put (which deletes the expired) keeps the live one.
	if err := s.PutSession(ctx, store.SessionKeyOf("id-3"), Session("carol", c.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetSession(ctx, k)
	WantErr(t, "GetSession after a put past Expires", err, store.ErrNotFound)
	wantSession(t, s, long, Session("bob", T0.Add(3*time.Hour)), T0)
	// A session put again after it expired lives again.
	if err := s.PutSession(ctx, k, Session("alice", c.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	wantSession(t, s, k, Session("alice", c.Now().Add(time.Hour)), c.Now())
}

func testSessionDelete(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	k, other := store.SessionKeyOf("id-1"), store.SessionKeyOf("id-2")
	for _, key := range []store.SessionKey{k, other} {
		if err := s.PutSession(ctx, key, Session("alice", T0.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	WantErr(t, "DeleteSession", s.DeleteSession(ctx, k), nil)
	_, err := s.GetSession(ctx, k)
	WantErr(t, "GetSession after DeleteSession", err, store.ErrNotFound)
	WantErr(t, "second DeleteSession", s.DeleteSession(ctx, k), nil)
	wantSession(t, s, other, Session("alice", T0.Add(time.Hour)), T0)
}

func testSessionInvalid(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	k := store.SessionKeyOf("id-1")
	for name, se := range map[string]store.Session{
		"Expires now":       Session("alice", T0),
		"Expires before":    Session("alice", T0.Add(-time.Hour)),
		"no Expires":        Session("alice", time.Time{}),
		"Expires past 9999": Session("alice", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)),
		"Who too long":      Session(strings.Repeat("x", store.MaxSessionWho+1), T0.Add(time.Hour)),
	} {
		WantErr(t, "PutSession with "+name, s.PutSession(ctx, k, se), store.ErrInvalid)
	}
	_, err := s.GetSession(ctx, k)
	WantErr(t, "GetSession after refused puts", err, store.ErrNotFound)
}

func testSessionRestart(t *testing.T, b Backend) {
	if b.Reopen == nil {
		t.Skip("nothing persists")
	}
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	k := store.SessionKeyOf("id-1")
	if err := s.PutSession(ctx, k, Session("alice", T0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	s = b.Reopen(t, s, c.Now)
	wantSession(t, s, k, Session("alice", T0.Add(time.Hour)), T0)
}
