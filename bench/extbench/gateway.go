// This file runs the real gateway binary (go build ./cmd/osb-gateway) as a
// separate process: a generated gateway.yaml with one tenant and one broker
// (the direct server), serve's defaults everywhere else.

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
)

// gatewayYAML is the gateway's configuration. Only what a benchmark needs
// differs from the defaults: the listener's port, no admin listener (one on
// loopback with pprof when profiling), no shutdown delay (it changes only
// how fast the process stops).
var gatewayYAML = template.Must(template.New("gateway.yaml").Parse(`# written by osb-gateway bench/extbench
listen:
  address: "{{.Listen}}"
  shutdown_delay: 0s
{{- if .Server}}
  server: {{.Server}}
{{- end}}
{{- if .Admin}}
admin: {address: "{{.Admin}}", token: "{{.Token}}", pprof: true}
{{- else}}
admin: {address: "off"}
{{- end}}
log: {format: json, level: info}
brokers:
  - name: ` + brokerName + `
    url: {{.Broker}}
    username: ` + brokerUser + `
    password: ` + brokerPass + `
    api_version: {min: "2.13", max: "2.17"}
    timeout: 30s
{{- if .Transport}}
    transport: {{.Transport}}
{{- end}}
tenants:
  - name: ` + tenantName + `
    credentials:
      - username: ` + tenantUser + `
        password: ` + tenantPass + `
    routes:
      - broker: ` + brokerName + `
{{- if .Observed}}
telemetry:
  traces: {exporter: stdout, sample_ratio: 0.01}
audit:
  sink: file
  path: {{.Dir}}/audit.log
  max_size: 32MiB
  max_files: 2
{{- end}}
`))

// gatewaySpec says which gateway to run.
type gatewaySpec struct {
	bin       string // the osb-gateway binary
	observed  bool   // tracing at 1 % (stdout exporter), metrics, audit to a file
	transport string // brokers[].transport when not empty
	server    string // listen.server when not empty
	// admin, when not empty, is the admin listener's address, with token
	// and admin.pprof: true.
	admin, token string
}

// writeGatewayConfig writes spec's gateway.yaml into a new directory under
// dir and returns its path and the gateway's listen address.
func writeGatewayConfig(dir, name string, spec gatewaySpec, brokerURL string) (path, listen string, err error) {
	d, err := os.MkdirTemp(dir, name+"-")
	if err != nil {
		return "", "", err
	}
	if listen, err = reference.FreePort(); err != nil {
		return "", "", err
	}
	var b bytes.Buffer
	if err := gatewayYAML.Execute(&b, map[string]any{
		"Listen": listen, "Admin": spec.admin, "Token": spec.token, "Broker": brokerURL,
		"Transport": spec.transport, "Server": spec.server, "Observed": spec.observed, "Dir": d,
	}); err != nil {
		return "", "", err
	}
	path = filepath.Join(d, "gateway.yaml")
	return path, listen, os.WriteFile(path, b.Bytes(), 0o600)
}

// checkGatewayConfig runs osb-gateway check -offline on the file and
// returns its complaint when it refuses it.
func checkGatewayConfig(bin, path string) error {
	out, err := exec.Command(bin, "check", "-offline", "-config", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s check: %v: %s", filepath.Base(bin), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// startGateway starts osb-gateway serve on the file; its standard error
// (the access log) and standard output (the trace exporter's spans) go to
// /dev/null, as a deployment's would go to a log collector.
func startGateway(bin, path, listen string) (*proc, error) {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	defer devNull.Close()
	cmd := exec.Command(bin, "serve", "-config", path)
	cmd.Stdout, cmd.Stderr = devNull, devNull
	p, _, err := start(cmd)
	if err != nil {
		return nil, err
	}
	if err := waitListening(listen, p, note("to /dev/null; run "+bin+" serve -config "+path+" to see it"), 20*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// note is a fixed text where a process's standard error is not kept.
type note string

func (n note) String() string { return string(n) }
