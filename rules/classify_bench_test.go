package rules

import "testing"

// classifyCases are the requests the benchmarks and the allocation test run:
// the common calls of a Cloud Controller, plus an error and an escaped id.
var classifyCases = []struct {
	name, method, path, query string
	allocs                    float64 // most allocations allowed per call
}{
	{"catalog", "GET", "/v2/catalog", "", 0},
	{"provision", "PUT", "/v2/service_instances/6a7b3c2e-1f0d-4e5a-9b8c-7d6e5f4a3b2c", "accepts_incomplete=true", 0},
	{"instance_last_operation", "GET", "/v2/service_instances/6a7b3c2e-1f0d-4e5a-9b8c-7d6e5f4a3b2c/last_operation",
		"service_id=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0&plan_id=1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809&operation=task-42", 0},
	{"binding_last_operation", "GET",
		"/v2/service_instances/6a7b3c2e-1f0d-4e5a-9b8c-7d6e5f4a3b2c/service_bindings/9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0/last_operation",
		"service_id=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0&plan_id=1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809", 0},
	{"unbind", "DELETE",
		"/v2/service_instances/6a7b3c2e-1f0d-4e5a-9b8c-7d6e5f4a3b2c/service_bindings/9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0",
		"accepts_incomplete=true&service_id=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0&plan_id=1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809", 0},
	{"escaped_operation", "GET", "/v2/service_instances/6a7b3c2e-1f0d-4e5a-9b8c-7d6e5f4a3b2c/last_operation",
		"operation=task%2F42", 1},
	{"escaped_id", "PUT", "/v2/service_instances/my%20instance", "", 1},
	{"not_found", "GET", "/v2/service_instances/x/foo", "", 2},
}

func TestClassifyAllocs(t *testing.T) {
	for _, tt := range classifyCases {
		t.Run(tt.name, func(t *testing.T) {
			got := testing.AllocsPerRun(100, func() {
				_, _ = Classify(tt.method, tt.path, tt.query)
			})
			if got > tt.allocs {
				t.Errorf("Classify(%q, %q, %q) allocates %v times, want at most %v",
					tt.method, tt.path, tt.query, got, tt.allocs)
			}
		})
	}
}

func BenchmarkClassify(b *testing.B) {
	for _, bb := range classifyCases {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = Classify(bb.method, bb.path, bb.query)
			}
		})
	}
}
