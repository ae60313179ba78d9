package jsonfast

import "testing"

// Allocation counts of the calls the gateway makes per request; none goes
// through a sync.Pool, so the counts hold under -race too.
func TestAllocs(t *testing.T) {
	doc := []byte(`{"state":"in progress","description":"provisioning","nested":[{"a":[1,2.5e3,true,null]}]}`)
	for _, tt := range []struct {
		name string
		f    func()
		max  float64
	}{
		{"Valid", func() { Valid(doc) }, 0},
		{"AppendString into a large enough buffer", func() { _ = AppendString(make([]byte, 0, 64)[:0], "a\"b\xffc") }, 1},
		{"AppendObjectMembers into a buffer on the stack", func() {
			var buf [8]Member
			ms, _, _ := AppendObjectMembers(buf[:0], doc, 0)
			_, _ = ms.Get(doc, "description")
		}, 0},
	} {
		if n := testing.AllocsPerRun(100, tt.f); n > tt.max {
			t.Errorf("%s: %v allocations, want at most %v", tt.name, n, tt.max)
		}
	}
}
