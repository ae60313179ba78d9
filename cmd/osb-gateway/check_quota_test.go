package main

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// TestCheckWarnsOfQuotasNamingNothing: a quota whose service or plan
// names nothing in its brokers' catalogs is a warning of check (it would
// count nothing); quotas naming what the catalog has, by name or id, are
// not, and warnings do not fail check.
func TestCheckWarnsOfQuotasNamingNothing(t *testing.T) {
	bs := httptest.NewServer(samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret"}))
	defer bs.Close()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	y := fmt.Sprintf(`brokers: [{name: b, url: %q, username: sample, password: sample-secret}]
tenants:
  - name: t
    credentials: [{username: u, password: platform-password}]
    quotas:
      - {service: sample, plan: sync, max_instances: 5}
      - {service: %s, max_instances: 5}
      - {service: smaple, max_instances: 5}
    routes: [{broker: b, quotas: [{plan: nosuch, max_instances: 1}]}]
`, bs.URL, samplebroker.ServiceID)
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runCheck([]string{"-config", path}, &stdout, &stderr)
	var warnings []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, "quota") {
			warnings = append(warnings, strings.TrimPrefix(l, path+": "))
		}
	}
	want := []string{
		`warning: tenants[0].quotas[2]: service "smaple" names nothing in the catalog of broker "b", so the quota counts nothing: check the names (or ids)`,
		`warning: tenants[0].routes[0].quotas[0]: plan "nosuch" names nothing in the catalog of broker "b", so the quota counts nothing: check the names (or ids)`,
	}
	if code != 0 || strings.Join(warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("exit %d, want 0; quota warnings:\n%s\nwant:\n%s\n(stdout %s)", code, strings.Join(warnings, "\n"), strings.Join(want, "\n"), stdout.String())
	}
}
