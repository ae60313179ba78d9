package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Defaults of "osb-gateway health".
const (
	// DefaultHealthAddr is the default admin.address.
	DefaultHealthAddr = "127.0.0.1:9090"
	// DefaultHealthTimeout bounds the whole check.
	DefaultHealthTimeout = 3 * time.Second
)

// runHealth asks a running gateway's admin listener for /healthz (or
// /readyz) and exits 0 on 200, 1 otherwise: a container HEALTHCHECK for
// images without curl or wget.
func runHealth(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("health", "health [-addr HOST:PORT] [-ready] [-timeout 3s]\n\n"+
		"Exits 0 when the admin listener answers GET /healthz (with -ready: /readyz) with 200, else 1.", stderr)
	addr := fs.String("addr", DefaultHealthAddr, "the admin listener (admin.address); a missing host means 127.0.0.1")
	ready := fs.Bool("ready", false, "ask /readyz (serving, catalogs warm if required) instead of /healthz")
	timeout := fs.Duration("timeout", DefaultHealthTimeout, "give up after this long")
	if code, ok := parseFlags(fs, args, false); !ok {
		return code
	}
	target, err := healthURL(*addr, *ready)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway health: -addr %q: %v\n", *addr, err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway health: %v\n", err)
		return exitUsage
	}
	res, err := (&http.Transport{}).RoundTrip(req) // no proxy from the environment: the admin listener is local
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway health: GET %s: %v\n", target, err)
		return exitFailed
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "osb-gateway health: GET %s answered %d, expected 200: %s\n", target, res.StatusCode, bytes.TrimSpace(body))
		return exitFailed
	}
	fmt.Fprintf(stdout, "%s: %s\n", target, bytes.TrimSpace(body))
	return exitOK
}

// healthURL is the URL of /healthz or /readyz at addr; an empty or
// unspecified host (":9090", "0.0.0.0:9090", "[::]:9090") means loopback.
func healthURL(addr string, ready bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	path := "/healthz"
	if ready {
		path = "/readyz"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
