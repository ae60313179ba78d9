package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// A Redis without persistence that restarts comes back empty, and so does
// one an operator flushes: every lock, inventory record and orphan is
// gone, while nothing in the protocol says so. The store notices through
// one key that marks its data:
//
//	<prefix>epoch   string: "<state> <token> <since> [<lost token>]", no TTL
//
// state is new (created on an empty Redis by the first store to connect),
// accepted (written by AcceptLoss) or lost (written by a store that knew
// an epoch and found the key gone). Every new connection checks the key
// before go-redis uses it (Options.OnConnect, one script): a restart of
// Redis always breaks the connections, so no command reaches a Redis that
// lost its data, and a call costs no round trip more. A store remembers
// the token it serves; finding the key gone, or a new epoch it does not
// know (the empty Redis taken for a new one by a process that never saw
// it), it writes the lost marker, so that every store, including one
// opened later, refuses with ErrLost until an operator accepts the loss.
//
// What it cannot tell: a store that finds no key and knows no epoch
// creates one, so a Redis that lost its data while no store was
// connected to it (every replica restarted with it) is taken for a new
// one. Sentinel: the promoted replica has the primary's marker, so a
// failover is no loss; connections to the Sentinels themselves are not
// checked. Cluster: the key lives on the master serving its slot, and
// only that master's restarts are noticed (the other masters answer the
// check with MOVED, and pass).

// Epoch states: what the marker says.
const (
	EpochNew      = "new"      // created on an empty Redis
	EpochAccepted = "accepted" // written by AcceptLoss after a loss
	EpochLost     = "lost"     // the Redis lost the data of epoch Token
)

// Epoch is what the marker of a store's data says.
type Epoch struct {
	// State is EpochNew, EpochAccepted or EpochLost; "" when there is no
	// marker (a Redis no gateway has used, or one that lost its data while
	// none was connected).
	State string
	// Token names the epoch: of the data the store holds, or for
	// EpochLost, of the data it lost.
	Token string
	// Since is when the marker was written: the epoch created or
	// accepted, the loss noticed.
	Since time.Time
	// Lost is, for EpochAccepted, the token of the epoch whose loss was
	// accepted ("" if the marker was missing).
	Lost string
}

// String says what e means, for people.
func (e Epoch) String() string {
	since := e.Since.UTC().Format(time.RFC3339)
	switch e.State {
	case EpochNew:
		return fmt.Sprintf("epoch %s, created on an empty Redis at %s", shortToken(e.Token), since)
	case EpochAccepted:
		if e.Lost == "" {
			return fmt.Sprintf("epoch %s, accepted at %s", shortToken(e.Token), since)
		}
		return fmt.Sprintf("epoch %s, accepted at %s after the loss of epoch %s", shortToken(e.Token), since, shortToken(e.Lost))
	case EpochLost:
		return fmt.Sprintf("epoch %s LOST: its marker was gone at %s", shortToken(e.Token), since)
	}
	return "no epoch marker"
}

// marker is e as stored.
func (e Epoch) marker() string {
	m := e.State + " " + e.Token + " " + e.Since.UTC().Format(time.RFC3339Nano)
	if e.State == EpochAccepted {
		m += " " + cmpOr(e.Lost, "-")
	}
	return m
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// parseEpoch reads a marker; ok is false for a value the store does not
// write.
func parseEpoch(v string) (e Epoch, ok bool) {
	f := strings.Fields(v)
	if len(f) < 3 || f[1] == "" {
		return Epoch{}, false
	}
	since, err := time.Parse(time.RFC3339Nano, f[2])
	if err != nil {
		return Epoch{}, false
	}
	e = Epoch{State: f[0], Token: f[1], Since: since}
	switch {
	case (e.State == EpochNew || e.State == EpochLost) && len(f) == 3:
	case e.State == EpochAccepted && len(f) == 4:
		if f[3] != "-" {
			e.Lost = f[3]
		}
	default:
		return Epoch{}, false
	}
	return e, true
}

func shortToken(t string) string { return t[:min(len(t), 8)] }

func (s *redisStore) epochKey() string { return s.prefix + "epoch" }

// checkEpochScript reads the marker, and writes one when it must.
// KEYS[1]: the marker. ARGV[1]: the token of the epoch this store serves
// ("": none yet); ARGV[2]: the marker of a new store; ARGV[3]: the marker
// of a loss. Returns the marker as it now stands.
var checkEpochScript = `
local v = redis.call('GET', KEYS[1])
if not v then
  if ARGV[1] == '' then
    redis.call('SET', KEYS[1], ARGV[2])
    return ARGV[2]
  end
  redis.call('SET', KEYS[1], ARGV[3])
  return ARGV[3]
end
if ARGV[1] ~= '' and string.match(v, '^new (%S+)') and string.match(v, '^new (%S+)') ~= ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[3])
  return ARGV[3]
end
return v
`

// epochState is the token a store serves, shared by its connections.
type epochState struct {
	mu    sync.Mutex
	token string
}

func (e *epochState) get() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.token
}

func (e *epochState) set(t string) {
	e.mu.Lock()
	e.token = t
	e.mu.Unlock()
}

// checkEpoch is the OnConnect hook of a store's client: it runs
// checkEpochScript on the new connection cn and refuses the connection
// (so the command that needed it fails) when the marker says the data is
// lost. A server error or a network error of the check fails the
// connection as it came (the command's ErrUnavailable), save MOVED and
// ASK: a Cluster master that does not serve the marker's slot has nothing
// to check.
func (s *redisStore) checkEpoch(ctx context.Context, cn *redis.Conn) error {
	if err := s.checkEpochOn(ctx, cn); err != nil {
		return &unwrapOnce{err}
	}
	return nil
}

// unwrapOnce carries an error through go-redis, which unwraps the error of
// OnConnect once before returning it (initPooledConn).
type unwrapOnce struct{ err error }

func (u *unwrapOnce) Error() string { return u.err.Error() }
func (u *unwrapOnce) Unwrap() error { return u.err }

func (s *redisStore) checkEpochOn(ctx context.Context, cn *redis.Conn) error {
	if s.unchecked || s.toSentinel(cn) {
		return nil
	}
	known, now := s.epoch.get(), s.now()
	fresh := Epoch{State: EpochNew, Token: newToken(), Since: now}
	lost := Epoch{State: EpochLost, Token: cmpOr(known, "-"), Since: now}
	v, err := cn.Eval(ctx, checkEpochScript, []string{s.epochKey()}, known, fresh.marker(), lost.marker()).Text()
	if _, moved := redis.IsMovedError(err); moved {
		return nil
	}
	if _, ask := redis.IsAskError(err); ask {
		return nil
	}
	if err != nil {
		return fmt.Errorf("redis: check the state's epoch marker %s on a new connection: %w", s.epochKey(), err)
	}
	e, ok := parseEpoch(v)
	switch {
	case !ok:
		return fmt.Errorf("%w: the key %s, which marks the gateway's state in Redis, holds %.80q, not a marker the gateway "+
			"writes (did another program write it?); the gateway refuses to work on this Redis until an operator runs "+
			"osb-gateway state accept-loss (docs/state.md#when-redis-loses-its-data)", store.ErrLost, s.epochKey(), v)
	case e.State == EpochLost:
		return s.lostError(e)
	}
	if e.Token != known {
		s.epoch.set(e.Token) // the first check, or an accepted loss
	}
	return nil
}

// lostError is ErrLost for the lost marker e, saying what happened and
// what the operator does.
func (s *redisStore) lostError(e Epoch) error {
	return fmt.Errorf("%w: Redis no longer holds the gateway's state: the key %s that marks it (epoch %s) was gone at %s, "+
		"so Redis restarted without persistence or was flushed, and every operation lock, inventory record and orphan it "+
		"held is gone; the gateway refuses to work on it (mutating calls get 503) until an operator restores what can be "+
		"restored and runs osb-gateway state accept-loss (docs/state.md#when-redis-loses-its-data)",
		store.ErrLost, s.epochKey(), shortToken(e.Token), e.Since.UTC().Format(time.RFC3339))
}

// toSentinel reports whether cn is a connection of a Sentinel client to a
// Sentinel rather than to the primary: go-redis runs OnConnect on both,
// and a Sentinel holds no keys. The primary's connections are the failover
// client's, which go-redis names "FailoverClient" (TestEpochSentinel
// holds it to that).
func (s *redisStore) toSentinel(cn *redis.Conn) bool {
	return s.cfg.MasterName != "" && !strings.Contains(cn.String(), "FailoverClient")
}

func newToken() string { return strings.ToLower(rand.Text()) }

// ErrNotLost is AcceptLoss's answer for a store whose marker says it has
// its data: there is no loss to accept.
var ErrNotLost = errors.New("redis: the store has not lost its data")

// acceptLossScript replaces the marker with ARGV[1] and the lost token,
// unless the marker says the data is there. KEYS[1]: the marker. Returns
// {1 if replaced, the marker as it was ("": none)}.
var acceptLossScript = `
local v = redis.call('GET', KEYS[1])
if v and (string.match(v, '^new ') or string.match(v, '^accepted ')) then
  return {0, v}
end
local lost = '-'
if v then lost = string.match(v, '^lost (%S+)') or '-' end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. lost)
return {1, v or ''}
`

// ReadEpoch returns the marker of st's data. st must be a store of this
// package (OpenUnchecked's, to read a marker that says lost: Open's
// refuses to connect then).
func ReadEpoch(ctx context.Context, st store.Store) (Epoch, error) {
	s, ok := st.(*redisStore)
	if !ok {
		return Epoch{}, fmt.Errorf("store %T is not a redis store", st)
	}
	v, err := s.client.Get(ctx, s.epochKey()).Result()
	if errors.Is(err, redis.Nil) {
		return Epoch{}, nil
	}
	if err != nil {
		return Epoch{}, s.fail(ctx, "GET", err)
	}
	e, ok := parseEpoch(v)
	if !ok {
		return Epoch{}, fmt.Errorf("%w: the key %s holds %.80q, not a marker the gateway writes", store.ErrLost, s.epochKey(), v)
	}
	return e, nil
}

// AcceptLoss ends the refusal of a Redis that lost the gateway's state:
// it writes a marker of a new epoch, accepted, in place of the lost one
// (or of none, or of one the gateway does not write), and every store on
// it serves again from its next connection. It returns the marker it
// replaced and the one it wrote; ErrNotLost, changing nothing, when the
// marker says the data is there. st is an OpenUnchecked store.
func AcceptLoss(ctx context.Context, st store.Store) (was, now Epoch, err error) {
	s, ok := st.(*redisStore)
	if !ok {
		return Epoch{}, Epoch{}, fmt.Errorf("store %T is not a redis store", st)
	}
	accepted := Epoch{State: EpochAccepted, Token: newToken(), Since: s.now()}
	m := accepted.State + " " + accepted.Token + " " + accepted.Since.UTC().Format(time.RFC3339Nano)
	res, err := s.client.Eval(ctx, acceptLossScript, []string{s.epochKey()}, m).Slice()
	if err != nil {
		return Epoch{}, Epoch{}, s.fail(ctx, "EVAL", err)
	}
	if len(res) != 2 {
		return Epoch{}, Epoch{}, fmt.Errorf("%w: redis: accept-loss script returned %v", store.ErrUnavailable, res)
	}
	replaced, _ := res[0].(int64)
	old, _ := res[1].(string)
	was, _ = parseEpoch(old)
	if replaced == 0 {
		return was, was, fmt.Errorf("%w: %s", ErrNotLost, was)
	}
	if was.State == EpochLost {
		accepted.Lost = was.Token
	}
	if s.epoch.get() != "" {
		s.epoch.set(accepted.Token)
	}
	return was, accepted, nil
}
