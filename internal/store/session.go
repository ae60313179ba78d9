package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Console sessions: the logins of the operator's console (package
// console), kept in the store so that every replica sharing it knows them:
// a login made on one replica works on another, a logout on one ends it on
// all, and a session ends at its Expires everywhere.
//
// The store never sees a session's id, the value of its cookie: it keys a
// session by the SHA-256 of the id (SessionKey), so a dump of the store
// yields no cookie. The id is 32 random bytes, so the hash cannot be
// reversed by guessing.

// SessionKey names a session in the store: the SHA-256 of its id.
type SessionKey [sha256.Size]byte

// SessionKeyOf returns the key of the session whose id (the cookie's
// value) is id.
func SessionKeyOf(id string) SessionKey { return sha256.Sum256([]byte(id)) }

// String is the key in hexadecimal, as the backends store it where a key
// is text (Redis); it is no secret.
func (k SessionKey) String() string { return hex.EncodeToString(k[:]) }

// MaxSessionWho bounds Session.Who in bytes.
const MaxSessionWho = 256

// Session is one login to the console.
type Session struct {
	// Who is the operator's name from the login form ("" if none).
	Who string
	// Check ties the session to what its login proved, for the console to
	// verify (it holds a MAC, keyed by the session id, of the admin token
	// the login used: a rotation of the token ends the session, and the
	// store holds nothing from which the token could be guessed). The
	// store keeps it as it is and compares nothing.
	Check [sha256.Size]byte
	// Created is when the login was made (zero: the store's now);
	// Expires when the session ends.
	Created, Expires time.Time
}

// SessionStore is the part of a Store that keeps console sessions. Its
// contract is the Store's (concurrency, contexts, errors). A session
// whose Expires is not after the store's clock is gone: GetSession does
// not return it.
type SessionStore interface {
	// PutSession stores s under k, replacing a session stored under k.
	// s.Expires must be after the store's clock and Who at most
	// MaxSessionWho bytes (ErrInvalid otherwise). It also deletes expired
	// sessions (memory, bolt, PostgreSQL; on Redis each session's key
	// expires by itself), so the store keeps about as many sessions as
	// are live.
	PutSession(ctx context.Context, k SessionKey, s Session) error

	// GetSession returns the live session k, or ErrNotFound.
	GetSession(ctx context.Context, k SessionKey) (Session, error)

	// DeleteSession deletes the session k, live or not: a logout. Deleting
	// a session that is not there is no error (a second logout). On
	// Redis with replica acknowledgements the delete waits for them like
	// a lock's acquire: a logout lost to a failover would bring the
	// session back.
	DeleteSession(ctx context.Context, k SessionKey) error
}

// NoSession is ErrNotFound for the session k.
func NoSession(k SessionKey) error {
	return fmt.Errorf("%w: console session %.12s…", ErrNotFound, k.String())
}

// sessionRecord is the JSON encoding of a Session.
type sessionRecord struct {
	Who     string `json:"who,omitempty"`
	Check   []byte `json:"check"`
	Created int64  `json:"created_us"`
	Expires int64  `json:"expires_us"`
}

// PrepareSession checks s against now, the store's clock, fills in
// Created, and returns it with its encoding.
func PrepareSession(s Session, now time.Time) (Session, []byte, error) {
	if s.Created.IsZero() {
		s.Created = now
	}
	s.Created, s.Expires = utc(s.Created), utc(s.Expires)
	switch {
	case len(s.Who) > MaxSessionWho:
		return Session{}, nil, fmt.Errorf("%w: console session: who is %d bytes, at most %d", ErrInvalid, len(s.Who), MaxSessionWho)
	case !storable(s.Created) || !storable(s.Expires):
		return Session{}, nil, fmt.Errorf("%w: console session has a time outside years 0 to 9999", ErrInvalid)
	case Expired(s.Expires, now):
		return Session{}, nil, fmt.Errorf("%w: console session expires at %s, not after now (%s)", ErrInvalid,
			s.Expires.Format(time.RFC3339Nano), utc(now).Format(time.RFC3339Nano))
	}
	enc, err := json.Marshal(sessionRecord{Who: s.Who, Check: s.Check[:], Created: s.Created.UnixMicro(), Expires: s.Expires.UnixMicro()})
	if err != nil {
		return Session{}, nil, fmt.Errorf("%w: console session: %w", ErrInvalid, err)
	}
	return s, enc, nil
}

// DecodeSession decodes a PrepareSession encoding.
func DecodeSession(b []byte) (Session, error) {
	var r sessionRecord
	if err := json.Unmarshal(b, &r); err != nil || len(r.Check) != sha256.Size {
		return Session{}, fmt.Errorf("%w: console session record does not decode", ErrUnavailable)
	}
	s := Session{Who: r.Who, Created: time.UnixMicro(r.Created).UTC(), Expires: time.UnixMicro(r.Expires).UTC()}
	copy(s.Check[:], r.Check)
	return s, nil
}

// LiveSession is what a backend's lookup of k returns: ErrNotFound when
// nothing was found or the session expired at now, else the session.
func LiveSession(k SessionKey, rec []byte, found bool, now time.Time) (Session, error) {
	if !found {
		return Session{}, NoSession(k)
	}
	s, err := DecodeSession(rec)
	if err != nil {
		return Session{}, err
	}
	if Expired(s.Expires, now) {
		return Session{}, NoSession(k)
	}
	return s, nil
}
