package proxy

import (
	"cmp"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// Budgets for a proxied pass-through GET, measured with the upstream's
// server side included (it runs in this process), so the gateway's own
// share is smaller: on the lean transport (the default) 51 allocations and
// 6.6 kB (56 before the answer header's hand-over, 68 and 7.0 kB before its
// request writer and answer reader), on the standard one
// (OSB_GATEWAY_TEST_TRANSPORT=standard) 86 and 8.6 kB. Counts
// are exact only without -race; the README's test command runs this test
// without it on both transports.
const (
	maxAllocsPerGET = 92
	maxBytesPerGET  = 9 << 10

	maxAllocsPerGETLean = 55
	maxBytesPerGETLean  = 7168
)

func TestProxiedGETAllocationBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts; run without -race (the README's test command does)")
	}
	maxAllocs, maxBytes := int64(maxAllocsPerGET), int64(maxBytesPerGET)
	if cmp.Or(suiteTransport, config.DefaultBrokerTransport) == config.TransportLean {
		maxAllocs, maxBytes = maxAllocsPerGETLean, maxBytesPerGETLean
	}
	for _, path := range []string{"/t1/b1/v2/catalog", "/t1/b1/v2/service_instances/i-1/last_operation?operation=op1"} {
		res := testing.Benchmark(func(b *testing.B) { benchProxiedGET(b, path) })
		allocs, bytes := res.AllocsPerOp(), res.AllocedBytesPerOp()
		t.Logf("%s: %d allocs, %d B per request", path, allocs, bytes)
		if allocs > maxAllocs || bytes > maxBytes {
			t.Errorf("%s: %d allocs and %d B per request; the budget is %d allocs and %d B",
				path, allocs, bytes, maxAllocs, maxBytes)
		}
	}
}
