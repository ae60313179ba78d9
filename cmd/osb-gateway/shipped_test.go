package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// sampleBrokerCmd is a documented "go run ./cmd/osb-sample-broker" line.
type sampleBrokerCmd struct {
	addr   string
	legacy bool
}

// documentedSampleBrokers reads the sample broker commands in the lines of
// path between the first line containing from and the next line starting
// with until ("" reads to the end).
func documentedSampleBrokers(t *testing.T, path, from, until string) []sampleBrokerCmd {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []sampleBrokerCmd
	in := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.Contains(line, from):
			in = true
		case in && until != "" && strings.HasPrefix(line, until):
			return out
		}
		_, rest, ok := strings.Cut(line, "go run ./cmd/osb-sample-broker")
		if !in || !ok {
			continue
		}
		rest, _, _ = strings.Cut(rest, "&")
		fs := flag.NewFlagSet("osb-sample-broker", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c := sampleBrokerCmd{}
		fs.StringVar(&c.addr, "addr", "127.0.0.1:8181", "")
		fs.BoolVar(&c.legacy, "legacy", false, "")
		if err := fs.Parse(strings.Fields(rest)); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		out = append(out, c)
	}
	return out
}

// TestShippedConfigCheckAsDocumented: gateway.yaml's header and the
// "Running it" of docs/operating.md start a sample broker for every broker the file
// names, and check (not offline) passes with exactly those brokers running.
// (Only the first broker was documented, so check exited 1 as written.)
func TestShippedConfigCheckAsDocumented(t *testing.T) {
	shipped, err := os.ReadFile("../../gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load("../../gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []struct{ path, from, until string }{
		{"../../gateway.yaml", "# osb-gateway configuration", "# Unknown keys"},
		{"../../docs/operating.md", "## Running it", "#"},
	} {
		t.Run(filepath.Base(doc.path), func(t *testing.T) {
			cmds := documentedSampleBrokers(t, doc.path, doc.from, doc.until)
			rewrite := []string{}
			for _, b := range cfg.Brokers {
				u, err := url.Parse(b.URL)
				if err != nil {
					t.Fatal(err)
				}
				var found *sampleBrokerCmd
				for i := range cmds {
					if cmds[i].addr == u.Host {
						found = &cmds[i]
					}
				}
				if found == nil {
					t.Errorf("broker %q (%s): no documented sample broker listens there (documented: %+v)", b.Name, u.Host, cmds)
					continue
				}
				srv := httptest.NewServer(samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", Legacy: found.legacy}))
				defer srv.Close()
				rewrite = append(rewrite, b.URL, srv.URL)
			}
			if t.Failed() {
				return
			}
			path := filepath.Join(t.TempDir(), "gateway.yaml")
			if err := os.WriteFile(path, []byte(strings.NewReplacer(rewrite...).Replace(string(shipped))), 0o600); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			if code := runCheck([]string{"-config", path}, &stdout, &stderr); code != 0 {
				t.Errorf("check -config gateway.yaml with the documented brokers: exit %d\n%s%s", code, stdout.String(), stderr.String())
			}
			if want := fmt.Sprintf("valid (%d tenants", len(cfg.Tenants)); !strings.Contains(stdout.String(), want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
			}
		})
	}
}
