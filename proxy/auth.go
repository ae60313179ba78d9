package proxy

import "github.com/osb-gateway/osb-gateway/proxy/internal/auth"

// Realm is the realm of the basic-auth challenge a platform gets with a
// 401 (auth.Realm).
const Realm = auth.Realm
