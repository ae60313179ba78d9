package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"
)

// A call's mode: how the platform's side of the connection behaves.
const (
	modeNormal    = ""          // net/http, keep-alive, a client timeout
	modeHalfClose = "halfclose" // raw socket: the request, then FIN, then read the answer
	modeHangUp    = "hangup"    // raw socket: the request, then an RST before the answer
)

// answer is what one HTTP exchange gave the platform.
type answer struct {
	status int    // 0: no answer
	body   []byte // the body read
	sent   bool   // the request may have reached the gateway (false: the dial failed)
	err    error  // why no answer came
}

// desc is the OSB error description of the answer, if any.
func (a answer) desc() string {
	var e struct{ Description string }
	_ = json.Unmarshal(a.body, &e)
	return e.Description
}

// object reports whether the body is a JSON object.
func (a answer) object() bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(a.body, &m) == nil && m != nil
}

// caller sends one platform's requests to the gateway replicas.
type caller struct {
	client   *http.Client
	user     string
	password string
	timeout  time.Duration
}

func newCaller(user, password string, timeout time.Duration) *caller {
	tr := &http.Transport{
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     30 * time.Second,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
	}
	return &caller{client: &http.Client{Transport: tr, Timeout: timeout}, user: user, password: password, timeout: timeout}
}

// do sends method path (with body, when not nil) to the gateway at addr.
func (c *caller) do(ctx context.Context, addr, mode, method, path string, body []byte, rng *rand.Rand) answer {
	switch mode {
	case modeHalfClose, modeHangUp:
		return c.raw(addr, mode, method, path, body, rng)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	if err != nil {
		return answer{err: err}
	}
	c.headers(req.Header, body != nil)
	res, err := c.client.Do(req)
	if err != nil {
		return answer{sent: !dialFailed(err), err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return answer{sent: true, err: fmt.Errorf("reading the %d answer: %w", res.StatusCode, err)}
	}
	return answer{status: res.StatusCode, body: b, sent: true}
}

func (c *caller) headers(h http.Header, body bool) {
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(c.user+":"+c.password)))
	h.Set("X-Broker-API-Version", "2.17")
	if body {
		h.Set("Content-Type", "application/json")
	}
}

// raw sends the request on a socket of its own: for a half-close, it
// closes its writing side after the request and reads the answer; for a
// hang-up, it waits a little and resets the connection without reading.
func (c *caller) raw(addr, mode, method, path string, body []byte, rng *rand.Rand) answer {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return answer{err: err}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(c.timeout))
	req, _ := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(body))
	if body == nil {
		req.Body = nil
	}
	c.headers(req.Header, body != nil)
	req.Close = true
	if err := req.Write(conn); err != nil {
		return answer{sent: true, err: err}
	}
	if mode == modeHangUp {
		time.Sleep(time.Duration(rng.Int64N(int64(1500 * time.Millisecond))))
		reset(conn)
		return answer{sent: true, err: errors.New("the platform hung up (RST) before reading the answer")}
	}
	_ = conn.(*net.TCPConn).CloseWrite()
	res, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return answer{sent: true, err: fmt.Errorf("half-closed call: %w", err)}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{sent: true, err: fmt.Errorf("half-closed call, reading the %d answer: %w", res.StatusCode, err)}
	}
	return answer{status: res.StatusCode, body: b, sent: true}
}

// dialFailed reports whether err is a failure to connect: nothing was sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || strings.Contains(err.Error(), "connection refused")
}
