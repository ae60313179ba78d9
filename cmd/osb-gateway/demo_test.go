package main

import (
	"os"

	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// TestDemoGuideWorksAsPrinted starts the demo and runs every curl command
// it prints, exactly as printed, through a shell.
func TestDemoGuideWorksAsPrinted(t *testing.T) {
	d, err := startDemo("127.0.0.1:0", "127.0.0.1:0", 100*time.Millisecond, newLogs(config.Log{Format: "text", Level: "error"}, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.srv.serve() }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = d.srv.shutdown(ctx)
		<-done
		d.stopBrokers()
	}()
	var guide bytes.Buffer
	d.printGuide(&guide)
	text := guide.String()
	if n := strings.Count(text, "cf create-service-broker "); n != 3 {
		t.Errorf("guide names %d routes, want 3:\n%s", n, text)
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed; the printed commands were not run")
	}
	// Join continued lines, then run each curl command.
	cmds := strings.Split(strings.ReplaceAll(text, "\\\n", ""), "\n")
	ran := 0
	for _, line := range cmds {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		out, err := exec.Command("bash", "-c", line).CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", line, err, out)
			continue
		}
		if !strings.HasPrefix(string(out), "{") {
			t.Errorf("%s: output is not JSON: %s", line, out)
		}
		ran++
	}
	if ran < 6 {
		t.Errorf("ran %d curl commands, want at least 6", ran)
	}
}

func TestShippedConfigurationsLoad(t *testing.T) {
	for _, path := range []string{"../../gateway.yaml"} {
		if _, err := config.Load(path); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
	// The Kubernetes example: the ConfigMap's gateway.yaml with the Secret's
	// values as its environment.
	raw, err := os.ReadFile("../../deploy/kubernetes/osb-gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var gw string
	env := map[string]string{}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var doc struct {
			Kind       string            `yaml:"kind"`
			Data       map[string]string `yaml:"data"`
			StringData map[string]string `yaml:"stringData"`
		}
		if dec.Decode(&doc) != nil {
			break
		}
		if doc.Kind == "ConfigMap" {
			gw = doc.Data["gateway.yaml"]
		}
		for k, v := range doc.StringData {
			env[k] = v
		}
	}
	if _, err := config.Parse([]byte(gw), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}); err != nil {
		t.Errorf("deploy/kubernetes ConfigMap: %v", err)
	}
	var out, errs bytes.Buffer
	if code := runCheck([]string{"-offline", "-config", "../../gateway.yaml"}, &out, &errs); code != 0 {
		t.Errorf("check gateway.yaml: exit %d: %s", code, errs.String())
	}
}
