// This file holds the HTTP plumbing every request kind shares: the headers
// platforms and brokers send, the in-process loopback servers, and GET
// and JSON helpers.

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// basic returns the value of a basic-auth Authorization header.
func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// platformHeader is what a platform sends through a proxy: the tenant's
// credentials, which every proxy replaces with the broker's.
func platformHeader() http.Header {
	return ccHeader(basic(tenantUser, tenantPass))
}

// ccHeader is what Cloud Controller sends with every call: credentials, the
// API version, its request identity and the originating user. The
// identity is fixed here; the gateway and the brokers only pass it on and
// echo it.
func ccHeader(authorization string) http.Header {
	return http.Header{
		"Authorization":                     {authorization},
		versionHeader:                       {apiVersion},
		"X-Broker-Api-Request-Identity":     {"6a1c7c28-3d1e-4f52-9a8b-2f0e4d5c6b7a"},
		"X-Broker-Api-Originating-Identity": {ccIdentity},
	}
}

// ccIdentity is Cloud Controller's originating identity of a user.
var ccIdentity = "cloudfoundry " + base64.StdEncoding.EncodeToString([]byte(`{"user_id":"683ea748-3092-4ff4-b656-39cacc4d5360"}`))

// serve serves h on a fresh loopback port and returns its base URL and a
// function that stops it. The server's goroutines, and so the handler's,
// carry the pprof label role=<role>.
func serve(role string, h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	return "http://" + ln.Addr().String(), serveListener(role, h, ln, nil), nil
}

// serveListener serves h on ln as serve does and returns a function that
// stops it; onNew, when not nil, is called for every connection accepted.
func serveListener(role string, h http.Handler, ln net.Listener, onNew func()) func() {
	srv := reference.NewServer(h) // the gateway's default listener settings
	if onNew != nil {
		srv.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				onNew()
			}
		}
	}
	var wg sync.WaitGroup
	pprof.Do(context.Background(), pprof.Labels("role", role), func(context.Context) {
		wg.Go(func() { _ = srv.Serve(ln) })
	})
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		wg.Wait()
	}
	return stop
}

// brokerHeader is what a platform sends to a broker directly.
func brokerHeader() http.Header {
	return ccHeader(basic(brokerUser, brokerPass))
}

// get sends GET path to t and returns the body of a 200 answer.
func get(t *target, path string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, t.url(path), nil)
	if err != nil {
		return nil, err
	}
	req.Header = t.header.Clone()
	client := http.DefaultClient
	if t.tls != nil {
		tr := &http.Transport{TLSClientConfig: t.tls}
		defer tr.CloseIdleConnections()
		client = &http.Client{Transport: tr}
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %.200s", res.StatusCode, body)
	}
	return body, nil
}

// versionHeader is X-Broker-API-Version in canonical form.
var versionHeader = http.CanonicalHeaderKey(osb.HeaderAPIVersion)

// decodeJSON requires status and decodes the JSON body of res into v.
func decodeJSON(res *http.Response, status int, v any) error {
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != status {
		return fmt.Errorf("status %d, want %d: %.200s", res.StatusCode, status, body)
	}
	return json.Unmarshal(body, v)
}
