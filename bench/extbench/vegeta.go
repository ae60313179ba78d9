// This file runs vegeta, the external open-loop load generator: requests at
// a fixed rate whatever the latency, so that a slow answer shows in the
// percentiles instead of lowering the load.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// vegetaModule is the pinned vegeta, built from its module at run time
// into a temporary GOBIN (it is no dependency of the gateway's go.mod).
const vegetaModule = "github.com/tsenart/vegeta/v12@v12.12.0"

// installVegeta builds vegetaModule into dir and returns the binary's path.
func installVegeta(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "gobin")
	cmd := exec.CommandContext(ctx, "go", "install", vegetaModule)
	cmd.Dir = dir // outside the gateway's module: its go.mod is not touched
	cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s: %v: %s", vegetaModule, err, strings.TrimSpace(string(out)))
	}
	return filepath.Join(bin, "vegeta"), nil
}

// vegetaResult is what one open-loop run reports.
type vegetaResult struct {
	rate     float64 // requests/s sent
	p50, p99 time.Duration
	success  float64 // share of 2xx answers
	requests int64
	errors   []string // vegeta's distinct errors, when any failed
	// used is what the target process used over the run (openLoop reads
	// it from /proc around the attack).
	used
}

// runVegeta sends GET url with the header lines at rate requests/s for d
// and returns vegeta's report.
func runVegeta(ctx context.Context, bin, dir, url string, header []string, rate int, d time.Duration) (vegetaResult, error) {
	targets := filepath.Join(dir, "vegeta-targets.txt")
	results := filepath.Join(dir, "vegeta-results.bin")
	spec := "GET " + url + "\n" + strings.Join(header, "\n") + "\n"
	if err := os.WriteFile(targets, []byte(spec), 0o600); err != nil {
		return vegetaResult{}, err
	}
	defer os.Remove(results)
	attack := exec.CommandContext(ctx, bin, "attack", "-format=http", "-targets="+targets,
		"-rate="+strconv.Itoa(rate)+"/1s", "-duration="+d.String(), "-keepalive=true", "-output="+results)
	if out, err := attack.CombinedOutput(); err != nil {
		return vegetaResult{}, fmt.Errorf("vegeta attack: %v: %s", err, out)
	}
	out, err := exec.CommandContext(ctx, bin, "report", "-type=json", results).Output()
	if err != nil {
		return vegetaResult{}, fmt.Errorf("vegeta report: %v", err)
	}
	return parseVegeta(out)
}

// parseVegeta reads vegeta's JSON report.
func parseVegeta(b []byte) (vegetaResult, error) {
	var rep struct {
		Latencies struct {
			P50 int64 `json:"50th"`
			P99 int64 `json:"99th"`
		} `json:"latencies"`
		Requests int64    `json:"requests"`
		Rate     float64  `json:"rate"`
		Success  float64  `json:"success"`
		Errors   []string `json:"errors"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return vegetaResult{}, fmt.Errorf("vegeta's JSON report: %w", err)
	}
	if rep.Requests == 0 {
		return vegetaResult{}, fmt.Errorf("vegeta's report counts no request")
	}
	return vegetaResult{rate: rep.Rate, p50: time.Duration(rep.Latencies.P50), p99: time.Duration(rep.Latencies.P99),
		success: rep.Success, requests: rep.Requests, errors: rep.Errors}, nil
}
