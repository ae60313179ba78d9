package deploytest

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"gopkg.in/yaml.v3"
)

// cfManifest is the part of a Cloud Foundry app manifest the deployment
// uses; decoding is strict, so a key outside it fails the test.
type cfManifest struct {
	Applications []struct {
		Name            string            `yaml:"name"`
		Memory          string            `yaml:"memory"`
		Instances       int               `yaml:"instances"`
		Buildpacks      []string          `yaml:"buildpacks"`
		Command         string            `yaml:"command"`
		HealthCheckType string            `yaml:"health-check-type"`
		Env             map[string]string `yaml:"env"`
	} `yaml:"applications"`
}

// TestCloudFoundryManifest: the app's gateway.yaml loads with the
// manifest's environment, keeps its locks in Redis (an app instance's
// disk is gone after a restart, so bolt would lose them; several instances
// would each have their own), listens on $PORT, and the manifest says
// nothing stale about Redis. (It used to push one instance with no state
// configuration and promise Redis "in a later release".)
func TestCloudFoundryManifest(t *testing.T) {
	raw, err := os.ReadFile("../cloudfoundry/manifest.yml")
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`(?i)later release`).Match(raw) {
		t.Error("the manifest still says Redis comes in a later release")
	}
	var m cfManifest
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if len(m.Applications) != 1 {
		t.Fatalf("%d applications, want 1", len(m.Applications))
	}
	app := m.Applications[0]
	args := strings.Fields(app.Command)
	file := configArg(args)
	if len(args) < 2 || args[0] != "./osb-gateway" || args[1] != "serve" || file == "" {
		t.Fatalf("command %q does not run ./osb-gateway serve -config FILE", app.Command)
	}
	env := map[string]string{"PORT": "8080"} // set by Cloud Foundry
	for k, v := range app.Env {
		env[k] = regexp.MustCompile(`\(\([\w-]+\)\)`).ReplaceAllString(v, "from-vars-file-0123456789")
	}
	env["REDIS_ADDR"] = "redis.example.internal:6379"
	cfg, err := config.Load(filepath.Join("../cloudfoundry", file), config.WithLookupEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	if err != nil {
		t.Fatalf("%s with the manifest's env: %v", file, err)
	}
	if cfg.State.Backend != "redis" {
		t.Errorf("state.backend %s: an instance's disk does not survive a restart, and %d instances would not share it", cfg.State.Backend, app.Instances)
	}
	if cfg.Listen.Address != ":8080" {
		t.Errorf("listen.address %s, want :$PORT", cfg.Listen.Address)
	}
	if d := *cfg.Listen.ShutdownDelay + cfg.Listen.ShutdownGrace; d.Seconds() >= 10 {
		t.Errorf("listen.shutdown_delay %s + shutdown_grace %s: Cloud Foundry kills the instance 10s after SIGTERM",
			*cfg.Listen.ShutdownDelay, cfg.Listen.ShutdownGrace)
	}
	ignore, err := os.ReadFile("../cloudfoundry/.cfignore")
	if err != nil || !strings.Contains(string(ignore), "manifest.yml") {
		t.Errorf(".cfignore should keep the manifest out of the pushed app: %v", err)
	}
}
