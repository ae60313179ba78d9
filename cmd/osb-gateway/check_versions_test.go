package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// TestCheckSaysWhichVersionsABrokerRefuses: a broker whose minimum is
// 2.13 (412 IncompatibleAPIVersion below) behind a gateway whose
// api_version is left at its defaults: check warns of the versions it
// refuses, and fails only when it refuses the version the gateway fetches
// the catalog at (Cloud Controller's, 2.15).
func TestCheckSaysWhichVersionsABrokerRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		min  osb.Version
		code int
		says []string
	}{
		{"minimum 2.13", osb.Version{Major: 2, Minor: 13}, 0, []string{
			`warning: broker "b" refuses X-Broker-API-Version 2.12 and below (412 IncompatibleAPIVersion); platforms at those versions get its refusal (brokers[].api_version {min: "2.13", max: "2.17"} has the gateway answer them with its own 412)`,
			`broker "b": catalog at 2.15 fetched, 0 findings`}},
		{"minimum 2.16", osb.Version{Major: 2, Minor: 16}, 1, []string{
			`warning: broker "b" refuses X-Broker-API-Version 2.15 and below (412 IncompatibleAPIVersion)`,
			`broker "b": catalog not fetched: broker "b" refuses X-Broker-API-Version 2.15 (412 IncompatibleAPIVersion): X-Broker-API-Version 2.15 is below 2.16, the lowest this broker accepts`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broker := httptest.NewServer(samplebroker.New(samplebroker.Options{MinVersion: tc.min, VersionCode: "IncompatibleAPIVersion"}))
			defer broker.Close()
			path := filepath.Join(t.TempDir(), "gateway.yaml")
			y := fmt.Sprintf("brokers: [{name: b, url: %q}]\ntenants: [{name: t, credentials: [{username: u, password: a-long-platform-secret}], routes: [{broker: b}]}]\n", broker.URL)
			if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := runCheck([]string{"-config", path}, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			for _, s := range tc.says {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q:\n%s", s, out)
				}
			}
		})
	}
}

func TestRefusedRuns(t *testing.T) {
	v := func(minor int) osb.Version { return osb.Version{Major: 2, Minor: minor} }
	refused := func(minors ...int) []proxy.RefusedVersion {
		var out []proxy.RefusedVersion
		for _, m := range minors {
			out = append(out, proxy.RefusedVersion{Version: v(m), Answer: "412"})
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		refused    []proxy.RefusedVersion
		runs, hint string
	}{
		{"one below", refused(0), "2.0 and below", ` (brokers[].api_version {min: "2.1", max: "2.17"} has the gateway answer them with its own 412)`},
		{"low and high", refused(0, 1, 2, 17), "2.2 and below, 2.17 and above", ` (brokers[].api_version {min: "2.3", max: "2.16"} has the gateway answer them with its own 412)`},
		{"inside", refused(5, 9, 10), "2.5, 2.9 to 2.10", ""},
		{"all", refused(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17), "2.0 to 2.17, every version of brokers[].api_version", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, hint := refusedRuns(v(0), v(17), tc.refused)
			if diff := cmp.Diff([2]string{tc.runs, tc.hint}, [2]string{runs, hint}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
