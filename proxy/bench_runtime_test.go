package proxy

import (
	"os"
	"runtime/metrics"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/gctune"
)

// BenchmarkHeapFloor is BenchmarkProxiedGET without the heap floor
// (runtime.heap_floor 0: GOGC 100) and with the default one, the policy
// serve applies (a gctune.Tuner). Each run reports besides the time the GC
// cycles per 1,000 calls and the GC's CPU per call outside idle time
// (runtime/metrics), which move less with the machine's load than ns/op.
// With -count the two alternate.
func BenchmarkHeapFloor(b *testing.B) {
	if _, set := os.LookupEnv("GOGC"); set {
		b.Skip("GOGC is set: the gateway keeps no heap floor then")
	}
	for _, path := range []string{"/t1/b1/v2/catalog", "/t1/b1/v2/service_instances/i-1/last_operation?operation=op1"} {
		for _, floor := range []string{"0", config.DefaultHeapFloor} {
			b.Run(path+"/heap_floor="+floor, func(b *testing.B) {
				rc := config.Runtime{HeapFloor: floor, GCPercent: config.DefaultGCPercent}
				t := gctune.Start(rc.HeapFloorBytes(), rc.GCPercent)
				defer t.Stop()
				g, r := benchGateway(b), benchRequest(path)
				before := readGCCost()
				benchServe(b, g, r)
				after := readGCCost()
				b.ReportMetric(float64(after.cycles-before.cycles)*1000/float64(b.N), "gc/1k-calls")
				b.ReportMetric((after.cpu-before.cpu)*1e9/float64(b.N), "gc-cpu-ns/op")
			})
		}
	}
}

// gcCost is what the GC has done since the process started: cycles, and
// CPU seconds in assists, dedicated workers and pauses (not idle workers,
// which use CPU nothing else wanted).
type gcCost struct {
	cycles uint64
	cpu    float64
}

func readGCCost() gcCost {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/mark/assist:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/dedicated:cpu-seconds"}, {Name: "/cpu/classes/gc/pause:cpu-seconds"}}
	metrics.Read(s)
	return gcCost{cycles: s[0].Value.Uint64(), cpu: s[1].Value.Float64() + s[2].Value.Float64() + s[3].Value.Float64()}
}
