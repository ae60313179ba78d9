// This file starts the targets: the direct server, and every proxy in front
// of it as a process of its own.

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// Target keys (the -targets flag), in the order they are reported.
const (
	keyDirect   = "direct"
	keyNginx    = "nginx"
	keyBare     = "bare"
	keyGateway  = "gateway"
	keyObserved = "observed"
	keyStandard = "standard"
	keyNetHTTP  = "nethttp"
	keyBefore   = "before"
)

var allKeys = []string{keyDirect, keyNginx, keyBare, keyGateway, keyNetHTTP, keyStandard, keyObserved, keyBefore}

// Credentials of the benchmark's broker and tenant, and the routes.
const (
	brokerUser = "bench-broker"
	brokerPass = "bench-broker-secret"
	tenantUser = "bench-platform"
	tenantPass = "bench-platform-secret"
	tenantName = "bench"
	brokerName = "sample"
	instanceID = "extbench-instance-0001"
)

// wantBody is what every target must answer (bench/extbench/direct's
// LastOperation, passed through).
const wantBody = `{"state":"in progress","description":"provisioning 42 of 100"}`

// target is one way to reach the direct server.
type target struct {
	key, name string
	url       string   // the last_operation request
	header    []string // "Name: value" lines, as Cloud Controller sends them
	proc      *proc    // the process whose CPU time is the target's
}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// ccHeader is what Cloud Controller sends with every call: credentials, the
// API version, its request identity and the originating user.
func ccHeader(authorization string) []string {
	identity := base64.StdEncoding.EncodeToString([]byte(`{"user_id":"683ea748-3092-4ff4-b656-39cacc4d5360"}`))
	return []string{
		"Authorization: " + authorization,
		"X-Broker-API-Version: 2.17",
		"X-Broker-API-Request-Identity: 6a1c7c28-3d1e-4f52-9a8b-2f0e4d5c6b7a",
		"X-Broker-API-Originating-Identity: cloudfoundry " + identity,
	}
}

// lastOperationPath is the request every target gets.
func lastOperationPath() string {
	q := url.Values{"service_id": {samplebroker.ServiceID}, "plan_id": {samplebroker.PlanAsyncID},
		"operation": {"extbench-operation"}}
	return "/v2/service_instances/" + instanceID + "/last_operation?" + q.Encode()
}

// bins are the binaries the benchmark built.
type bins struct{ direct, bare, gateway string }

// buildBins builds the direct server, the bare proxy and the gateway into
// dir (go build, from the module the working directory is in).
func buildBins(ctx context.Context, dir string) (bins, error) {
	const mod = "github.com/osb-gateway/osb-gateway/"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+"/",
		mod+"bench/extbench/direct", mod+"bench/extbench/bareproxy", mod+"cmd/osb-gateway")
	if out, err := cmd.CombinedOutput(); err != nil {
		return bins{}, fmt.Errorf("go build: %v: %s", err, out)
	}
	return bins{direct: filepath.Join(dir, "direct"), bare: filepath.Join(dir, "bareproxy"),
		gateway: filepath.Join(dir, "osb-gateway")}, nil
}

// startTargets starts the direct server and the targets keys name, and
// returns them in report order with a function that stops them. A target
// that cannot run here (no nginx; a gateway without brokers[].transport:
// standard) is left out with a note through logf.
func startTargets(o *options, dir string, b bins) ([]*target, func(), error) {
	var procs []*proc
	stopAll := func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop()
		}
	}
	ok := false
	defer func() {
		if !ok {
			stopAll()
		}
	}()
	path := lastOperationPath()
	platform := ccHeader(basic(tenantUser, tenantPass))

	dp, daddr, err := startPrinting(exec.Command(b.direct, "-listen", "127.0.0.1:0"))
	if err != nil {
		return nil, nil, fmt.Errorf("direct: %w", err)
	}
	procs = append(procs, dp)
	directURL := "http://" + daddr
	var ts []*target
	add := func(t *target) { ts = append(ts, t) }
	for _, key := range allKeys {
		if !slices.Contains(o.targets, key) {
			continue
		}
		switch key {
		case keyDirect:
			add(&target{key: key, name: "direct (Go server, precomputed bytes)", url: directURL + path,
				header: ccHeader(basic(brokerUser, brokerPass)), proc: dp})
		case keyNginx:
			v := reference.NginxVersion()
			if v == "" {
				if err := ensureTool("nginx", "nginx-light", o.install, o.logf); err != nil {
					o.logf("no nginx row: %v", err)
					continue
				}
				v = reference.NginxVersion()
			}
			p, addr, err := startNginx(dir, daddr)
			if err != nil {
				return nil, nil, err
			}
			procs = append(procs, p)
			o.nginx = v
			add(&target{key: key, name: v + " (upstream keep-alive)", url: "http://" + addr + path, header: platform, proc: p})
		case keyBare:
			p, addr, err := startPrinting(exec.Command(b.bare, "-listen", "127.0.0.1:0", "-upstream", directURL,
				"-username", brokerUser, "-password", brokerPass))
			if err != nil {
				return nil, nil, fmt.Errorf("bare proxy: %w", err)
			}
			procs = append(procs, p)
			add(&target{key: key, name: "bare tuned httputil.ReverseProxy (GOGC 400)", url: "http://" + addr + path,
				header: platform, proc: p})
		case keyGateway, keyNetHTTP, keyStandard, keyObserved, keyBefore:
			spec, name := gatewaySpec{bin: b.gateway}, "osb-gateway, default configuration"
			switch key {
			case keyObserved:
				spec.observed, name = true, "osb-gateway, tracing 1 % + metrics + audit file"
			case keyStandard:
				spec.transport, name = "standard", "osb-gateway, brokers[].transport: standard"
			case keyNetHTTP:
				spec.server, name = "standard", "osb-gateway, listen.server: standard (net/http)"
			case keyBefore:
				if o.before == "" {
					o.logf("no before row: -before names no binary")
					continue
				}
				spec.bin, name = o.before, "osb-gateway "+o.beforeLabel+", default configuration"
			}
			cfg, listen, err := writeGatewayConfig(dir, key, spec, directURL)
			if err != nil {
				return nil, nil, err
			}
			if err := checkGatewayConfig(spec.bin, cfg); err != nil {
				if key == keyStandard || key == keyNetHTTP {
					o.logf("no %s row: this gateway does not take its configuration (%v)", key, err)
					continue
				}
				return nil, nil, err
			}
			p, err := startGateway(spec.bin, cfg, listen)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", name, err)
			}
			procs = append(procs, p)
			add(&target{key: key, name: name, url: "http://" + listen + "/" + tenantName + "/" + brokerName + path,
				header: platform, proc: p})
		}
	}
	for _, t := range ts {
		if err := checkTarget(t); err != nil {
			return nil, nil, err
		}
	}
	ok = true
	return ts, stopAll, nil
}

// checkTarget sends the request once and requires 200 with wantBody, so a
// misconfigured target fails before any load is sent.
func checkTarget(t *target) error {
	req, err := http.NewRequest(http.MethodGet, t.url, nil)
	if err != nil {
		return err
	}
	req.Close = true // no idle connection left behind
	for _, h := range t.header {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(body) != wantBody {
		return fmt.Errorf("%s: %d %s, want 200 %s", t.name, res.StatusCode, body, wantBody)
	}
	return nil
}
