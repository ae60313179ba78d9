package proxy

import (
	"github.com/osb-gateway/osb-gateway/proxy/internal/owner"
	"github.com/osb-gateway/osb-gateway/proxy/internal/protect"
)

// What answered a call in the broker's place, as Scope.Protection names it
// (the protection stages, proxy/internal/protect).
const (
	ProtectionRateLimit    = protect.ProtectionRateLimit
	ProtectionOverload     = protect.ProtectionOverload
	ProtectionBreaker      = protect.ProtectionBreaker
	ProtectionQueueTimeout = protect.ProtectionQueueTimeout
)

// BreakerInfo is a broker's circuit breaker as the View shows it
// (protect.BreakerInfo).
type BreakerInfo = protect.BreakerInfo

// ProtectionOwner: the call named another tenant's instance on a broker
// several tenants reach (the owner stage, proxy/internal/owner).
const ProtectionOwner = owner.ProtectionOwner
