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

// identityCache is direct-mapped and lock-free: a header's slot holds its
// entry until another header that hashes there replaces it. Entries are
// never changed once stored.
var identityCache struct {
	seed  maphash.Seed
	slots [identityCacheSlots]atomic.Pointer[identityEntry]
}

func init() { identityCache.seed = maphash.MakeSeed() }

// CachedIdentity is DecodeIdentity for a header seen before: the decoded
// identity is remembered, so a platform's repeated header costs a hash and
// a comparison, no allocation. The *Identity returned is shared and must
// not be changed.
func CachedIdentity(header string) *Identity {
	if len(header) > maxCachedIdentityHeader {
		return DecodeIdentity(header)
	}
	slot := &identityCache.slots[maphash.String(identityCache.seed, header)%identityCacheSlots]
	if e := slot.Load(); e != nil && e.header == header {
		return e.id
	}
	id := DecodeIdentity(header)
	slot.Store(&identityEntry{header: header, id: id})
	return id
}
