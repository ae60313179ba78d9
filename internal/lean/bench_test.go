package lean

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// benchAnswer is a last_operation answer as a Go broker sends it.
const benchAnswer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Mon, 02 Jan 2006 15:04:05 GMT\r\nContent-Length: 62\r\n\r\n" +
	`{"state":"in progress","description":"creating the instance"}` + "\n"

// newBenchBroker serves benchAnswer to every request without a body, at
// as little cost as it can, so that the benchmark measures the client.
func newBenchBroker(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					if len(line) == 2 { // the blank line ending a request
						if _, err := io.WriteString(c, benchAnswer); err != nil {
							return
						}
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/v2/service_instances/i-1/last_operation?operation=op1"
}

// benchOutRequest is a request as the gateway's ReverseProxy sends it.
func benchOutRequest(b *testing.B, ctx context.Context, url string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header = http.Header{
		"Authorization":        {"Basic YnJva2VyOnNlY3JldA=="},
		"X-Broker-Api-Version": {"2.14"},
		"X-Forwarded-For":      {"127.0.0.1"},
		"Traceparent":          {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"X-Request-Id":         {"4bf92f3577b34da6a3ce929d0e0e4736"},
		"User-Agent":           {""},
	}
	return req
}

// reportCPU reports the process's CPU time per op (client and broker
// side, user and system) from now to when its result is called: on a
// loopback the latency is mostly the scheduler's, the CPU time is what a
// loaded gateway would spend.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() {
		if cpu := processCPU() - start; cpu > 0 {
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}

// BenchmarkExchange is one GET last_operation over a kept-alive loopback
// connection (serial, parallel) or one that answers from memory (memory:
// the transport's own work; -background: with a context that never ends):
// "stdlib" with (*http.Request).Write and http.ReadResponse, "fast" with
// writeRequest and readResponse. On loopback the broker side runs in this
// process and is in the figures.
func BenchmarkExchange(b *testing.B) {
	url := newBenchBroker(b)
	for _, mode := range []struct {
		name   string
		stdlib bool
	}{{"stdlib", true}, {"fast", false}} {
		tr := &Transport{stdlib: mode.stdlib}
		b.Cleanup(tr.CloseIdleConnections)
		call := func(b *testing.B, req *http.Request) { roundTrip(b, tr, req) }
		b.Run(mode.name+"/serial", func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background()) // as a server's request's
			defer cancel()
			req := benchOutRequest(b, ctx, url)
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				call(b, req)
			}
		})
		b.Run(mode.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			b.RunParallel(func(pb *testing.PB) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req := benchOutRequest(b, ctx, url)
				for pb.Next() {
					call(b, req)
				}
			})
		})
		for _, background := range []bool{false, true} {
			name := mode.name + "/memory"
			if background {
				name += "-background" // a context without Done: no AfterFunc
			}
			b.Run(name, func(b *testing.B) {
				benchMemory(b, mode.stdlib, background, url)
			})
		}
	}
}

// benchMemory is BenchmarkExchange's in-memory case: the transport's own
// work, on a connection that answers from memory.
func benchMemory(b *testing.B, stdlib, background bool, url string) {
	tr := &Transport{stdlib: stdlib, DialContext: func(context.Context, string, string) (net.Conn, error) {
		return &memConn{}, nil
	}}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if background {
		ctx = context.Background()
	}
	req := benchOutRequest(b, ctx, url)
	b.ReportAllocs()
	for b.Loop() {
		roundTrip(b, tr, req)
	}
}

// roundTrip sends req through tr and reads the answer's body to its end,
// so that the connection goes back to the pool.
func roundTrip(b *testing.B, tr *Transport, req *http.Request) {
	res, err := tr.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		b.Fatal(err)
	}
	res.Body.Close()
}

// memConn is a connection to a broker that answers benchAnswer to each
// write (a whole request, as bufio.Writer's Flush writes it).
type memConn struct {
	net.Conn // not called
	answer   []byte
	off      int // of what is left to read in answer
}

func (m *memConn) Write(p []byte) (int, error) {
	if m.off == len(m.answer) {
		m.answer, m.off = m.answer[:0], 0
	}
	m.answer = append(m.answer, benchAnswer...)
	return len(p), nil
}

func (m *memConn) Read(p []byte) (int, error) {
	if m.off == len(m.answer) {
		return 0, io.EOF
	}
	n := copy(p, m.answer[m.off:])
	m.off += n
	return n, nil
}

func (m *memConn) Close() error                     { return nil }
func (m *memConn) SetDeadline(time.Time) error      { return nil }
func (m *memConn) SetReadDeadline(time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(time.Time) error { return nil }
