package main

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

//go:embed demo.yaml
var demoYAML []byte

// demo is a running demo: two sample brokers (one in 2.8 legacy mode) and
// the gateway in front of them, all on loopback.
type demo struct {
	srv      *server
	brokers  []*http.Server
	env      map[string]string
	cfg      *config.Config
	gateway  string // base URL
	adminURL string
}

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", "demo [-addr HOST:PORT] [-admin-addr HOST:PORT] [-async-delay 2s]\n\n"+
		"Runs two sample brokers (OSB 2.17 and a 2.8 legacy one) behind the gateway on loopback.", stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "gateway listen address")
	adminAddr := fs.String("admin-addr", "127.0.0.1:9090", "admin listen address")
	asyncDelay := fs.Duration("async-delay", 2*time.Second, "how long the sample broker's async operations take")
	if code, ok := parseFlags(fs, args, false); !ok {
		return code
	}
	d, err := startDemo(*addr, *adminAddr, *asyncDelay, newLogs(config.Log{Format: "text", Level: "info"}, stderr))
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway demo: %v\n", err)
		return 1
	}
	d.printGuide(stdout)
	d.srv.runtime = startRuntime(d.cfg.Runtime, os.LookupEnv, os.DirFS("/"), d.srv.log)
	code := d.srv.runUntilSignal()
	d.srv.runtime.stop()
	d.stopBrokers()
	return code
}

// startDemo starts the sample brokers and the gateway; it returns once all
// listeners are open.
func startDemo(addr, adminAddr string, asyncDelay time.Duration, l logs) (*demo, error) {
	d := &demo{env: map[string]string{
		"DEMO_ADDR":            addr,
		"DEMO_ADMIN_ADDR":      adminAddr,
		"DEMO_BROKER_PASSWORD": randomSecret(),
		"DEMO_PROD_PASSWORD":   randomSecret(),
		"DEMO_DEV_PASSWORD":    randomSecret(),
		"DEMO_ADMIN_TOKEN":     randomSecret(),
	}}
	for _, b := range []struct {
		env    string
		legacy bool
	}{{"DEMO_BROKER_URL", false}, {"DEMO_LEGACY_URL", true}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			d.stopBrokers()
			return nil, fmt.Errorf("sample broker: %w", err)
		}
		h := samplebroker.New(samplebroker.Options{Username: "sample-broker", Password: d.env["DEMO_BROKER_PASSWORD"],
			AsyncDelay: asyncDelay, Legacy: b.legacy})
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		d.brokers = append(d.brokers, hs)
		d.env[b.env] = "http://" + ln.Addr().String()
	}
	cfg, err := d.loadConfig("")
	if err != nil {
		d.stopBrokers()
		return nil, fmt.Errorf("embedded configuration: %w", err)
	}
	d.cfg = cfg
	srv, err := newServer(cfg, "(embedded demo configuration)", l)
	if err != nil {
		d.stopBrokers()
		return nil, err
	}
	srv.load = d.loadConfig
	srv.hashOf = func(string) string { return hashBytes(demoYAML) }
	srv.setHash(srv.hashOf(""))
	d.srv = srv
	d.gateway = "http://" + srv.mainLn.Addr().String()
	if srv.adminLn != nil {
		d.adminURL = "http://" + srv.adminLn.Addr().String()
	}
	return d, nil
}

func (d *demo) loadConfig(string) (*config.Config, error) {
	return config.Parse(demoYAML, config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := d.env[k]
		return v, ok
	}})
}

func (d *demo) stopBrokers() {
	for _, b := range d.brokers {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = b.Shutdown(ctx)
		cancel()
	}
}

// printGuide prints what an operator would run against the demo.
func (d *demo) printGuide(w io.Writer) {
	fmt.Fprintf(w, "osb-gateway demo: the gateway listens on %s, its admin API on %s\n\n", d.gateway, d.adminURL)
	if d.adminURL != "" {
		fmt.Fprintf(w, "The operator's console: open %s/ and log in with the admin token %s\n\n", d.adminURL, d.env["DEMO_ADMIN_TOKEN"])
	}
	fmt.Fprintln(w, "Register each route with Cloud Foundry:")
	var first struct{ user, pass, url string }
	for _, t := range d.cfg.Tenants {
		c := t.Credentials[0]
		for _, r := range t.Routes {
			url := d.gateway + r.Prefix
			fmt.Fprintf(w, "  cf create-service-broker %s-%s %s %s %s\n", r.Broker, t.Name, c.Username, c.Password.Reveal(), url)
			if first.url == "" {
				first.user, first.pass, first.url = c.Username, c.Password.Reveal(), url
			}
		}
	}
	u, p, base := first.user, first.pass, first.url
	id := "demo-instance-1"
	fmt.Fprintf(w, `
Try it with curl:
  # the catalog
  curl -s -u %[1]s:%[2]s -H 'X-Broker-API-Version: 2.17' %[3]s/v2/catalog
  # provision an instance of the sync plan
  curl -s -u %[1]s:%[2]s -H 'X-Broker-API-Version: 2.17' -H 'Content-Type: application/json' -X PUT \
    %[3]s/v2/service_instances/%[4]s -d '{"service_id":"%[5]s","plan_id":"%[6]s","organization_guid":"org","space_guid":"space","context":{"platform":"cloudfoundry"}}'
  # read it back
  curl -s -u %[1]s:%[2]s -H 'X-Broker-API-Version: 2.17' %[3]s/v2/service_instances/%[4]s
  # a missing version header is refused with 412
  curl -s -u %[1]s:%[2]s %[3]s/v2/catalog
  # wrong credentials get 401
  curl -s -u %[1]s:wrong -H 'X-Broker-API-Version: 2.17' %[3]s/v2/catalog
  # delete it
  curl -s -u %[1]s:%[2]s -H 'X-Broker-API-Version: 2.17' -X DELETE '%[3]s/v2/service_instances/%[4]s?service_id=%[5]s&plan_id=%[6]s'
  # health and readiness
  curl -s %[7]s/healthz; curl -s %[7]s/readyz

Press Ctrl-C to stop.
`, u, p, base, id, samplebroker.ServiceID, samplebroker.PlanSyncID, d.adminURL)
}

// randomSecret returns 24 random characters for demo passwords.
func randomSecret() string {
	const alphabet = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(errors.New("crypto/rand failed"))
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
