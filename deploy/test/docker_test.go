package deploytest

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// dockerfile is deploy/Dockerfile read as instructions (continuation
// lines joined), with its comment lines kept apart.
type dockerfile struct {
	args     map[string]string // ARG defaults before the first FROM
	stages   []stage
	comments []string
}

type stage struct {
	from, name   string
	instructions []string // "KEYWORD rest", keyword upper-cased
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	return readDockerfileAt(t, "../Dockerfile")
}

func readDockerfileAt(t *testing.T, file string) dockerfile {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d := dockerfile{args: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	var cur string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			d.comments = append(d.comments, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		cur += strings.TrimSuffix(line, "\\") + " "
		if strings.HasSuffix(line, "\\") {
			continue
		}
		inst := strings.TrimSpace(cur)
		cur = ""
		if inst == "" {
			continue
		}
		kw, rest, _ := strings.Cut(inst, " ")
		kw = strings.ToUpper(kw)
		switch {
		case kw == "ARG" && len(d.stages) == 0:
			k, v, _ := strings.Cut(rest, "=")
			d.args[k] = v
		case kw == "FROM":
			f := strings.Fields(rest)
			s := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			d.stages = append(d.stages, s)
		case len(d.stages) > 0:
			s := &d.stages[len(d.stages)-1]
			s.instructions = append(s.instructions, kw+" "+rest)
		}
	}
	return d
}

var digestRef = regexp.MustCompile(`^[a-z0-9./:-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}$`)

// TestDockerfile: every base image is pinned by digest; the default target
// (the last stage) holds the gateway alone, runs as non-root with a
// HEALTHCHECK through "osb-gateway health" and a volume for its state; the
// sample broker has a target of its own.
func TestDockerfile(t *testing.T) {
	d := readDockerfile(t)
	checkGatewayStage(t, d)
	final := d.stages[len(d.stages)-1]
	all := strings.Join(final.instructions, "\n")
	if strings.Contains(all, "osb-sample-broker") {
		t.Errorf("the gateway image (the default target) carries the sample broker:\n%s", all)
	}
	var broker bool
	for _, s := range d.stages[:len(d.stages)-1] {
		broker = broker || (s.name == "sample-broker" && strings.Contains(strings.Join(s.instructions, "\n"), "osb-sample-broker"))
	}
	if !broker {
		t.Error("no sample-broker target")
	}
}

// checkGatewayStage: every base image of d is pinned by digest; its last
// stage runs the gateway as non-root, with a HEALTHCHECK through
// "osb-gateway health", SIGTERM to stop and a volume for its state.
func checkGatewayStage(t *testing.T, d dockerfile) {
	t.Helper()
	for _, s := range d.stages {
		ref := s.from
		if m := regexp.MustCompile(`^\$\{?(\w+)\}?$`).FindStringSubmatch(ref); m != nil {
			ref = d.args[m[1]]
		}
		isStage := false
		for _, o := range d.stages {
			isStage = isStage || (o.name != "" && o.name == ref)
		}
		if !isStage && !digestRef.MatchString(ref) {
			t.Errorf("FROM %s (%s): not pinned by digest", s.from, ref)
		}
	}
	final := d.stages[len(d.stages)-1]
	all := strings.Join(final.instructions, "\n")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^USER 65532(:65532)?$`),
		regexp.MustCompile(`(?m)^HEALTHCHECK .*CMD \["/usr/local/bin/osb-gateway", "health"`),
		regexp.MustCompile(`(?m)^VOLUME \["/var/lib/osb-gateway"\]$`),
		regexp.MustCompile(`(?m)^STOPSIGNAL SIGTERM$`),
		regexp.MustCompile(`(?m)^ENTRYPOINT \["/usr/local/bin/osb-gateway"\]$`),
	} {
		if !want.MatchString(all) {
			t.Errorf("the gateway stage lacks %s:\n%s", want, all)
		}
	}
}

// TestDockerExampleKeepsStateAndListens: the configuration the Dockerfile's
// run example mounts listens on every interface of the container (so -p
// reaches it), and keeps its bolt file on the volume the example mounts.
// (The example mounted the repository's gateway.yaml: 127.0.0.1, a file in
// the working directory of a container without a volume.)
func TestDockerExampleKeepsStateAndListens(t *testing.T) {
	d := readDockerfile(t)
	var run string
	for _, c := range d.comments {
		if strings.HasPrefix(c, "docker run") && strings.Contains(c, "/etc/osb-gateway/gateway.yaml") {
			run = c
		}
	}
	if run == "" {
		t.Fatal("the Dockerfile's comments show no docker run mounting /etc/osb-gateway/gateway.yaml")
	}
	mounts, env := map[string]string{}, map[string]string{}
	f := strings.Fields(strings.ReplaceAll(run, `"`, ""))
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "-v":
			src, dst, _ := strings.Cut(f[i+1], ":")
			dst, _, _ = strings.Cut(dst, ":")
			mounts[dst] = src
		case "-e":
			k, v, _ := strings.Cut(f[i+1], "=")
			env[k] = v
		}
	}
	src := mounts["/etc/osb-gateway/gateway.yaml"]
	file := filepath.Join("../..", strings.TrimPrefix(src, "$PWD/"))
	cfg, err := config.Load(file, config.WithLookupEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	if err != nil {
		t.Fatalf("%s (mounted by the example): %v", src, err)
	}
	host, _, _ := net.SplitHostPort(cfg.Listen.Address)
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		t.Errorf("%s: listen.address %s is not every interface of the container: docker run -p cannot reach it", src, cfg.Listen.Address)
	}
	switch cfg.State.Backend {
	case "bolt":
		onVolume := false
		for dst := range mounts {
			onVolume = onVolume || (path.IsAbs(cfg.State.Path) && strings.HasPrefix(cfg.State.Path, dst+"/") && dst != "/etc/osb-gateway/gateway.yaml")
		}
		if !onVolume {
			t.Errorf("%s: state.path %s is on no volume of the example (mounts: %v): the locks die with the container", src, cfg.State.Path, mounts)
		}
	case "memory":
		t.Errorf("%s: state.backend memory", src)
	}
}

// TestDockerignore: the build context leaves out .git and what the image
// does not need, and keeps every file the two commands are built from.
func TestDockerignore(t *testing.T) {
	raw, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			if strings.HasPrefix(l, "!") {
				t.Fatalf("exceptions (%s) are not understood by this test", l)
			}
			patterns = append(patterns, strings.TrimPrefix(l, "/"))
		}
	}
	ignored := func(p string) bool {
		for _, pat := range patterns {
			if rest, ok := strings.CutPrefix(pat, "**/"); ok {
				if m, _ := path.Match(rest, path.Base(p)); m {
					return true
				}
				continue
			}
			if m, _ := path.Match(pat, p); m || strings.HasPrefix(p, pat+"/") {
				return true
			}
		}
		return false
	}
	for _, p := range []string{".git", ".git/config", "deploy/test/go.mod", "e2e/lifecycle_test.go"} {
		if !ignored(p) {
			t.Errorf("%s is sent to the Docker daemon", p)
		}
	}
	cmd := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}`,
		"./cmd/osb-gateway", "./cmd/osb-sample-broker")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, _ := filepath.Abs("../..")
	needed := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		rel, err := filepath.Rel(root, f[0])
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // a module from the cache
		}
		for _, name := range f[1:] {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, name)))
		}
	}
	for _, p := range needed {
		if ignored(p) {
			t.Errorf("%s is needed to build the image but .dockerignore leaves it out", p)
		}
	}
}
