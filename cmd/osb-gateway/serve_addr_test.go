package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// serve takes -listen and -admin for a quick try: they replace the file's
// addresses, at the start and at every reload (serve's load), and are
// checked as the file's would be.
func TestServeAddressFlags(t *testing.T) {
	t.Setenv("BROKER_USERNAME", "u")
	t.Setenv("BROKER_PASSWORD", "p")
	t.Setenv("PLATFORM_PASSWORD", "change-me-please")
	const path = "../../examples/minimal.yaml"
	for _, tc := range []struct {
		name, args             string
		listen, admin, wantErr string
	}{
		{"none", "", ":8080", "127.0.0.1:9090", ""},
		{"both", "-listen 127.0.0.1:18080 -admin 127.0.0.1:19090", "127.0.0.1:18080", "127.0.0.1:19090", ""},
		{"admin off", "-admin off", ":8080", "off", ""},
		{"no port", "-listen 127.0.0.1", "", "", `-listen: must be host:port (such as 127.0.0.1:8080), got "127.0.0.1"`},
		{"admin not an address", "-admin nowhere", "", "", `-admin: must be host:port`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o := addrFlags(fs)
			if err := fs.Parse(strings.Fields(tc.args)); err != nil {
				t.Fatal(err)
			}
			cfg, err := o.load(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || loadExitCode(err) != exitUsage {
					t.Fatalf("%v, want %q (exit %d)", err, tc.wantErr, exitUsage)
				}
				return
			}
			if err != nil || cfg.Listen.Address != tc.listen || cfg.Admin.Address != tc.admin {
				t.Fatalf("listen %q, admin %q, %v; want %q, %q", cfg.Listen.Address, cfg.Admin.Address, err, tc.listen, tc.admin)
			}
		})
	}
}
