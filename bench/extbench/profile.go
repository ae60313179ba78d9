// This file takes a CPU profile of the gateway process under the external
// generator, through the admin listener's pprof routes (admin.pprof).

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
)

// profileGateway starts a gateway in its default configuration plus an
// admin listener with admin.pprof, loads it with wrk at o.conns for
// o.profileDuration and writes the CPU profile taken meanwhile to
// o.profile.
func profileGateway(ctx context.Context, o *options, dir string, b bins) error {
	dp, daddr, err := startPrinting(exec.Command(b.direct, "-listen", "127.0.0.1:0"))
	if err != nil {
		return err
	}
	defer dp.stop()
	admin, err := reference.FreePort()
	if err != nil {
		return err
	}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	token := hex.EncodeToString(tok)
	spec := gatewaySpec{bin: b.gateway, admin: admin, token: token}
	cfg, listen, err := writeGatewayConfig(dir, "profile", spec, "http://"+daddr)
	if err != nil {
		return err
	}
	if err := checkGatewayConfig(b.gateway, cfg); err != nil {
		return fmt.Errorf("-profile needs a gateway with admin.pprof: %w", err)
	}
	p, err := startGateway(b.gateway, cfg, listen)
	if err != nil {
		return err
	}
	defer p.stop()
	t := &target{key: keyGateway, name: "gateway (profiled)", header: ccHeader(basic(tenantUser, tenantPass)), proc: p,
		url: "http://" + listen + "/" + tenantName + "/" + brokerName + lastOperationPath()}
	if err := checkTarget(t); err != nil {
		return err
	}
	if _, err := measure(ctx, t, o.conns, time.Second); err != nil { // warm up
		return err
	}
	secs := max(1, int(o.profileDuration/time.Second))
	type result struct {
		body []byte
		err  error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet,
			"http://"+admin+"/admin/debug/pprof/profile?seconds="+strconv.Itoa(secs), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err == nil && res.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET /admin/debug/pprof/profile: %d %s", res.StatusCode, body)
		}
		got <- result{body, err}
	}()
	o.logf("profiling the gateway for %ds under wrk at %d connections", secs, o.conns)
	s, err := measure(ctx, t, o.conns, time.Duration(secs+1)*time.Second)
	if err != nil {
		return err
	}
	r := <-got
	if r.err != nil {
		return r.err
	}
	o.logf("profile: %.0f req/s, %s µs CPU/req; written to %s", s.rps, perRequest(s.cpu, s.requests), o.profile)
	return os.WriteFile(o.profile, r.body, 0o644)
}
