package audit

import (
	"hash/maphash"
	"sync/atomic"
)

// identityCacheSlots is the size of the decoded-identity cache: a platform
// sends the same header for every call of one user, and a few hundred
// users are active at a time.
const identityCacheSlots = 512

// maxCachedIdentityHeader is the longest header the cache keeps.
const maxCachedIdentityHeader = 512

// identityEntry is one cached header and what it decodes to.
type identityEntry struct {
	header string
	id     *Identity
}

// identitySlots is the cache, direct-mapped and lock-free: a header's slot
// holds its entry until another header that hashes there (by identitySeed)
// replaces it. Entries are never changed once stored.
var (
	identitySeed  = maphash.MakeSeed()
	identitySlots [identityCacheSlots]atomic.Pointer[identityEntry]
)

// CachedIdentity is DecodeIdentity for a header seen before: the decoded
// identity is remembered, so a platform's repeated header costs a hash and
// a comparison, no allocation. Measured against DecodeIdentity per record
// (BenchmarkChainCanned/gateway-1pct-audit, callgrind): an audited call 2
// allocations lighter and 4% fewer instructions. The *Identity returned is shared and must
// not be changed.
func CachedIdentity(header string) *Identity {
	if len(header) > maxCachedIdentityHeader {
		return DecodeIdentity(header)
	}
	slot := &identitySlots[maphash.String(identitySeed, header)%identityCacheSlots]
	if e := slot.Load(); e != nil && e.header == header {
		return e.id
	}
	id := DecodeIdentity(header)
	slot.Store(&identityEntry{header: header, id: id})
	return id
}
