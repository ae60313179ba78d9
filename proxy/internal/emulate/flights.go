// Package emulate is the legacy emulation stages: what the gateway answers
// in a broker's place. So far the sharing of an identical call in flight
// (WithFlights: a platform's repeat gets the first call's answer, and the
// broker one call); fetch, safe repeats, gone, the async shim, the sync
// facade and poll shielding join it as the services they read leave
// proxy/ (docs/architecture.md). It imports the core, and no other stage.
package emulate

import (
	"crypto/sha256"
	"net/http"
	"sync"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// EmulatedShared is Scope.Emulated for a repeat that got the answer of the
// identical call in flight before it.
const EmulatedShared = "shared"

// maxSharedBody is the largest answer a flight keeps to hand to the
// repeats waiting for it; a larger one is not shared (they go on alone).
const maxSharedBody = 1 << 20

// Flights lets a platform that repeats a mutating call while the first is
// still in flight — the same tenant, method, path, query, version and body
// — wait for the first call's answer instead of reaching the broker
// twice (or getting the guard's 400 for its own operation). Across
// replicas the operation lock already blocks the repeat. It is one per
// process, shared by reloads.
type Flights struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*flight
}

// flight is one call in flight and, once done, its answer.
type flight struct {
	done    chan struct{}
	ok      bool // the answer was kept whole and may be shared
	status  int
	header  http.Header
	body    []byte
	waiters int
}

func NewFlights() *Flights { return &Flights{m: make(map[[sha256.Size]byte]*flight)} }

// WithFlights is the flight stage, just before the guard (see flights).
func WithFlights(f *Flights) core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			if !s.Call.Endpoint.Mutating() {
				next.ServeHTTP(w, r)
				return
			}
			key := flightKey(s, r)
			f.mu.Lock()
			if fl := f.m[key]; fl != nil {
				fl.waiters++
				f.mu.Unlock()
				select {
				case <-fl.done:
					if fl.ok {
						s.Emulated = EmulatedShared
						fl.replay(w)
						return
					}
				case <-r.Context().Done():
					s.Fail(w, r.Context().Err())
					return
				}
				next.ServeHTTP(w, r) // the first answer could not be shared
				return
			}
			fl := &flight{done: make(chan struct{})}
			f.m[key] = fl
			f.mu.Unlock()
			rec := &flightRecorder{ResponseWriter: w, fl: fl}
			defer func() {
				f.mu.Lock()
				delete(f.m, key)
				f.mu.Unlock()
				fl.ok = fl.ok && rec.wrote && !rec.tooLarge
				close(fl.done)
			}()
			fl.ok = true
			next.ServeHTTP(rec, r)
		})
	}
}

// flightKey names a call by everything that makes a repeat identical.
func flightKey(s *core.Scope, r *http.Request) [sha256.Size]byte {
	h := sha256.New()
	for _, part := range []string{s.Tenant, s.Broker, r.Method, s.Path, r.URL.RawQuery, s.Forward} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(s.Body)
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// replay writes the shared answer: its status, headers (less the first
// call's request identity: the scope stage set this call's own) and body.
func (fl *flight) replay(w http.ResponseWriter) {
	h := w.Header()
	for k, vs := range fl.header {
		if k == core.HeaderRequestIdentity {
			continue
		}
		h[k] = append([]string(nil), vs...)
	}
	w.WriteHeader(fl.status)
	_, _ = w.Write(fl.body)
}

// flightRecorder passes the first call's answer on and keeps a copy.
type flightRecorder struct {
	http.ResponseWriter
	fl       *flight
	wrote    bool
	tooLarge bool
}

func (rec *flightRecorder) WriteHeader(status int) {
	if !rec.wrote && status >= 200 {
		rec.wrote = true
		rec.fl.status = status
		rec.fl.header = rec.ResponseWriter.Header().Clone()
	}
	rec.ResponseWriter.WriteHeader(status)
}

func (rec *flightRecorder) Write(p []byte) (int, error) {
	if !rec.wrote {
		rec.WriteHeader(http.StatusOK)
	}
	if !rec.tooLarge {
		if len(rec.fl.body)+len(p) > maxSharedBody {
			rec.tooLarge, rec.fl.body = true, nil
		} else {
			rec.fl.body = append(rec.fl.body, p...)
		}
	}
	return rec.ResponseWriter.Write(p)
}

// Unwrap lets ScopeOf and http.ResponseController reach the writer below.
func (rec *flightRecorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// Waiters is the number of calls waiting for an identical call's answer.
func (f *Flights) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, fl := range f.m {
		n += fl.waiters
	}
	return n
}
