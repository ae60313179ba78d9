package lean

import (
	"testing"
)

// TestRequestHeadAllocs: checking a request line before its fields come
// (badFirstLine, for a head that did not come whole) allocates nothing
// for a well-formed line of a path target, escaped or not; and parsing a
// platform's head allocates what it did before the request line was
// checked as net/http checks it (4: the request, its header map, the
// block of its strings).
func TestRequestHeadAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	for _, line := range []string{
		"GET /v2/catalog HTTP/1.1\r\n",
		"DELETE /v2/service_instances/i-1?accepts_incomplete=true&service_id=%7Bs%7D&plan_id=p HTTP/1.1\r\n",
		"PUT /v2/service_instances/caf%C3%A9 HTTP/1.0\n",
		"get /v2/catalog HTTP/1.3\r\n",
	} {
		buf := []byte(line + "Host: gw\r\n")
		if rerr := badFirstLine(buf); rerr != nil {
			t.Fatalf("%q: %v", line, rerr.msg)
		}
		if n := testing.AllocsPerRun(100, func() { _ = badFirstLine(buf) }); n != 0 {
			t.Errorf("badFirstLine(%q): %v allocations, want 0", line, n)
		}
	}
	head := []byte("GET /v2/service_instances/i-1/last_operation?operation=op&service_id=s&plan_id=p HTTP/1.1\r\n" +
		"Host: gw\r\nAuthorization: Basic dDE6cDE=\r\nX-Broker-API-Version: 2.17\r\nUser-Agent: cc\r\nAccept: application/json\r\n")
	n := testing.AllocsPerRun(100, func() {
		p := reqParser{headParser{head: head}}
		if _, rerr := p.parse(); rerr != nil {
			t.Fatal(rerr.msg)
		}
	})
	if n > 4 {
		t.Errorf("parse: %v allocations, want at most 4", n)
	}
}

// BenchmarkRequestHead parses a poll's head as Cloud Controller sends it.
func BenchmarkRequestHead(b *testing.B) {
	head := []byte("GET /v2/service_instances/i-1/last_operation?operation=op&service_id=s&plan_id=p HTTP/1.1\r\n" +
		"Host: gw\r\nAuthorization: Basic dDE6cDE=\r\nX-Broker-API-Version: 2.17\r\nUser-Agent: cc\r\nAccept: application/json\r\n")
	b.ReportAllocs()
	for b.Loop() {
		p := reqParser{headParser{head: head}}
		if _, rerr := p.parse(); rerr != nil {
			b.Fatal(rerr.msg)
		}
	}
}
