package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyTest: "policy test" prints each rule's verdict and the
// decision, from a request file and from an audit record, and exits 1 for
// a denial.
func TestPolicyTest(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gateway.yaml")
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("gateway.yaml", `
brokers: [{name: b, url: "http://127.0.0.1:9"}]
tenants:
  - name: cf
    credentials: [{username: u, password: p}]
    routes:
      - broker: b
        policies:
          - name: size-cap
            match: {endpoints: [provision, update]}
            deny: "has(request.parameters.size) && request.parameters.size > 10"
            message: "\"size \" + string(request.parameters.size) + \" is over 10\""
policies:
  - name: region-eu
    match: {endpoints: [provision]}
    force: {region: "'eu-1'"}
  - name: binds
    match: {endpoints: [bind]}
    deny: "true"
  - name: team
    require: "identity.value.user_id == 'u-1'"
`)
	tests := []struct {
		name, request string
		code          int
		want          []string
	}{
		{"denied", `{"tenant":"cf","broker":"b","endpoint":"provision","instance_id":"i","originating_identity":"cloudfoundry eyJ1c2VyX2lkIjoidS0xIn0=",
			"body":{"service_id":"s","plan_id":"p","parameters":{"size":12}}}`, 1,
			[]string{"region-eu  force.region  \"eu-1\"", "binds      deny          not matched", "size-cap   deny          true (refuses)",
				`denied by policy "size-cap": size 12 is over 10`}},
		{"let through", `{"tenant":"cf","broker":"b","endpoint":"provision","instance_id":"i","originating_identity":"cloudfoundry eyJ1c2VyX2lkIjoidS0xIn0=",
			"body":{"service_id":"s","plan_id":"p","parameters":{"size":2}}}`, 0,
			[]string{"team       require       true (passes)", "let through", `parameters sent on: {"region":"eu-1","size":2}`}},
		{"an audit record", `{"time":"2026-01-02T03:04:05Z","request_id":"r","tenant":"cf","broker":"b","endpoint":"provision","method":"PUT",
			"instance_id":"i","identity":{"platform":"cloudfoundry","user_id":"u-2"},"status":201,"duration_ms":1,"outcome":"forwarded","blocked":false,"prev_hash":"x"}`, 1,
			[]string{`denied by policy "team": refused by identity.value.user_id == 'u-1'`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := write("req.json", tt.request)
			var out, errOut bytes.Buffer
			code := run([]string{"policy", "test", "-config", cfg, "-request", req}, strings.NewReader(""), &out, &errOut)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tt.code, errOut.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
