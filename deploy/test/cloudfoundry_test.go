package deploytest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
		Services        []string          `yaml:"services"`
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

// vcapServices is what Cloud Foundry gives an app bound to a marketplace
// PostgreSQL (whose JSON escapes "/" and "&"), a log drain and a Redis:
// only the first's uri is a PostgreSQL URL.
const vcapServices = `{"postgres":[{"name":"osb-gateway-db","label":"postgres","plan":"small",
"credentials":{"username":"gw","password":"pg-secret","uri":"postgres:\/\/gw:pg-secret@pg-a.example.internal:5432,pg-b.example.internal:5432\/osb?sslmode=require\u0026target_session_attrs=read-write","jdbcUrl":"jdbc:postgresql:\/\/pg-a.example.internal:5432\/osb"}}],
"user-provided":[{"name":"logs","credentials":{"uri":"syslog-tls://logs.example.internal:6514"}}],
"redis":[{"name":"cache","credentials":{"uri": "redis://:x@redis.example.internal:6379"}}]}`

// TestCloudFoundryPostgresManifest: manifest-postgres.yml decodes strictly,
// binds a database service and starts the gateway through vcap-postgres,
// which sets POSTGRES_URL to the bound PostgreSQL's uri credential from
// VCAP_SERVICES (run here with sh on a VCAP_SERVICES as Cloud Foundry
// writes it); gateway-postgres.yaml then loads with the manifest's env and
// that URL into state.postgres, and listens on $PORT. vcap-postgres refuses
// no PostgreSQL or two, never printing a URL, and a POSTGRES_URL already
// set wins.
func TestCloudFoundryPostgresManifest(t *testing.T) {
	raw, err := os.ReadFile("../cloudfoundry/manifest-postgres.yml")
	if err != nil {
		t.Fatal(err)
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
	if len(app.Services) != 1 {
		t.Errorf("services %v: want the one database service bound", app.Services)
	}
	if app.Instances < 2 {
		t.Errorf("%d instances: the variant is for several sharing one database", app.Instances)
	}
	args := strings.Fields(app.Command)
	if len(args) < 3 || args[0] != "./vcap-postgres" || args[1] != "./osb-gateway" || args[2] != "serve" || configArg(args) == "" {
		t.Fatalf("command %q does not run ./vcap-postgres ./osb-gateway serve -config FILE", app.Command)
	}
	script, err := filepath.Abs("../cloudfoundry/vcap-postgres")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(script); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("vcap-postgres is not an executable file: %v", err)
	}
	// run runs vcap-postgres as the start command would, with a command
	// that prints the URL it was given instead of the gateway.
	run := func(env ...string) (string, string, error) {
		cmd := exec.Command("sh", script, "sh", "-c", `printf %s "$POSTGRES_URL"`)
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	const want = "postgres://gw:pg-secret@pg-a.example.internal:5432,pg-b.example.internal:5432/osb?sslmode=require&target_session_attrs=read-write"
	url, said, err := run("VCAP_SERVICES=" + vcapServices)
	if err != nil || url != want {
		t.Fatalf("vcap-postgres: %v (%s), gave %q, want %q", err, said, url, want)
	}
	for name, env := range map[string]string{
		"no service bound": "VCAP_SERVICES={}",
		"two PostgreSQLs":  "VCAP_SERVICES=" + strings.Replace(vcapServices, "syslog-tls:", "postgresql:", 1),
	} {
		out, said, err := run(env)
		if err == nil || out != "" || !strings.Contains(said, "set POSTGRES_URL") || strings.Contains(said, "pg-secret") {
			t.Errorf("%s: vcap-postgres ran the gateway or said %q (%v)", name, said, err)
		}
	}
	if url, _, err := run("VCAP_SERVICES="+vcapServices, "POSTGRES_URL=postgres://set@h/db"); err != nil || url != "postgres://set@h/db" {
		t.Errorf("a POSTGRES_URL already set: %q, %v", url, err)
	}

	env := map[string]string{"PORT": "8080", "POSTGRES_URL": want} // PORT from Cloud Foundry, POSTGRES_URL from vcap-postgres
	for k, v := range app.Env {
		env[k] = regexp.MustCompile(`\(\([\w-]+\)\)`).ReplaceAllString(v, "from-vars-file-0123456789")
	}
	cfg, err := config.Load(filepath.Join("../cloudfoundry", configArg(args)), config.WithLookupEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	if err != nil {
		t.Fatalf("%s with the manifest's env: %v", configArg(args), err)
	}
	wantPostgres(t, cfg, want, 5, 5*time.Second, 5*time.Second)
	if cfg.Listen.Address != ":8080" {
		t.Errorf("listen.address %s, want :$PORT", cfg.Listen.Address)
	}
	if d := *cfg.Listen.ShutdownDelay + cfg.Listen.ShutdownGrace; d.Seconds() >= 10 {
		t.Errorf("listen.shutdown_delay + shutdown_grace %s: Cloud Foundry kills the instance 10s after SIGTERM", d)
	}
	ignore, err := os.ReadFile("../cloudfoundry/.cfignore")
	if err != nil || !strings.Contains(string(ignore), "manifest-postgres.yml") {
		t.Errorf(".cfignore should keep manifest-postgres.yml out of the pushed app: %v", err)
	}
}
