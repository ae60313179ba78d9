package deploytest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// image is the one name of the released image; its tag is the chart's
// appVersion.
const image = "ghcr.io/osb-gateway/osb-gateway"

// goreleaser is the pinned release tool, run with go run (never a
// dependency in go.mod).
const goreleaser = "github.com/goreleaser/goreleaser/v2@v2.15.1"

// chartAppVersion is deploy/helm/osb-gateway/Chart.yaml's appVersion: the
// release's tag, the one place the version is written.
func chartAppVersion(t *testing.T) string {
	t.Helper()
	var chart struct {
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	readYAML(t, filepath.Join(chartDir, "Chart.yaml"), &chart)
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(chart.AppVersion) || "v"+chart.Version != chart.AppVersion {
		t.Fatalf("Chart.yaml: appVersion %q, version %q: want appVersion vX.Y.Z, the release's tag, and version X.Y.Z", chart.AppVersion, chart.Version)
	}
	return chart.AppVersion
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// releaseConfig is the part of .goreleaser.yaml these tests read.
type releaseConfig struct {
	Builds []struct {
		ID      string   `yaml:"id"`
		Main    string   `yaml:"main"`
		Env     []string `yaml:"env"`
		Goos    []string `yaml:"goos"`
		Goarch  []string `yaml:"goarch"`
		Flags   []string `yaml:"flags"`
		Ldflags []string `yaml:"ldflags"`
	} `yaml:"builds"`
	Sboms []struct {
		Artifacts string   `yaml:"artifacts"`
		IDs       []string `yaml:"ids"`
		Cmd       string   `yaml:"cmd"`
		Args      []string `yaml:"args"`
	} `yaml:"sboms"`
	Checksum struct {
		Algorithm string `yaml:"algorithm"`
	} `yaml:"checksum"`
	DockersV2 []struct {
		IDs        []string `yaml:"ids"`
		Dockerfile string   `yaml:"dockerfile"`
		Images     []string `yaml:"images"`
		Tags       []string `yaml:"tags"`
		Platforms  []string `yaml:"platforms"`
	} `yaml:"dockers_v2"`
}

// TestReleaseConfig: .goreleaser.yaml builds static, -trimpath gateway
// binaries for linux and darwin on amd64 and arm64 with the version, the
// revision and the date stamped into variables version.go has; SHA-256
// checksums; a CycloneDX SBOM of each binary from the pinned
// cyclonedx-gomod; the image ghcr.io/osb-gateway/osb-gateway:v<version>
// from the linux binaries.
func TestReleaseConfig(t *testing.T) {
	var rc releaseConfig
	readYAML(t, "../../.goreleaser.yaml", &rc)
	i := slices.IndexFunc(rc.Builds, func(b struct {
		ID      string   `yaml:"id"`
		Main    string   `yaml:"main"`
		Env     []string `yaml:"env"`
		Goos    []string `yaml:"goos"`
		Goarch  []string `yaml:"goarch"`
		Flags   []string `yaml:"flags"`
		Ldflags []string `yaml:"ldflags"`
	}) bool {
		return b.Main == "./cmd/osb-gateway"
	})
	if i < 0 {
		t.Fatal("no build of ./cmd/osb-gateway")
	}
	b := rc.Builds[i]
	sorted := func(s []string) []string { return slices.Sorted(slices.Values(s)) }
	if !reflect.DeepEqual(sorted(b.Goos), []string{"darwin", "linux"}) || !reflect.DeepEqual(sorted(b.Goarch), []string{"amd64", "arm64"}) {
		t.Errorf("targets %v × %v, want linux and darwin × amd64 and arm64", b.Goos, b.Goarch)
	}
	if !slices.Contains(b.Env, "CGO_ENABLED=0") {
		t.Errorf("env %v: not static (CGO_ENABLED=0)", b.Env)
	}
	if !slices.Contains(b.Flags, "-trimpath") {
		t.Errorf("flags %v: no -trimpath", b.Flags)
	}
	src, err := os.ReadFile("../../cmd/osb-gateway/version.go")
	if err != nil {
		t.Fatal(err)
	}
	ld := strings.Join(b.Ldflags, " ")
	for _, v := range []string{"version", "revision", "date"} {
		if !strings.Contains(ld, "-X main."+v+"=") {
			t.Errorf("ldflags %q do not stamp main.%s", ld, v)
		}
		if !regexp.MustCompile(`(?m)^\s+` + v + `\s+= ""$`).Match(src) {
			t.Errorf("cmd/osb-gateway/version.go has no variable %s for -X main.%s", v, v)
		}
	}
	if !strings.Contains(ld, "main.version=v{{ .Version }}") {
		t.Errorf("ldflags %q: version is not the tag (v{{ .Version }})", ld)
	}
	if rc.Checksum.Algorithm != "sha256" {
		t.Errorf("checksum algorithm %q, want sha256", rc.Checksum.Algorithm)
	}
	sbom := false
	for _, s := range rc.Sboms {
		sbom = sbom || (s.Artifacts == "binary" && slices.Contains(s.IDs, b.ID) &&
			slices.Contains(s.Args, "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0"))
	}
	if !sbom {
		t.Error("no SBOM of the gateway binaries by cyclonedx-gomod@v1.10.0")
	}
	if len(rc.DockersV2) != 1 {
		t.Fatalf("%d dockers_v2 images, want 1", len(rc.DockersV2))
	}
	d := rc.DockersV2[0]
	if !reflect.DeepEqual(d.Images, []string{image}) || !reflect.DeepEqual(d.Tags, []string{"v{{ .Version }}"}) {
		t.Errorf("image %v:%v, want %s:v{{ .Version }}", d.Images, d.Tags, image)
	}
	if !reflect.DeepEqual(d.IDs, []string{b.ID}) || !slices.Contains(d.Platforms, "linux/amd64") || !slices.Contains(d.Platforms, "linux/arm64") {
		t.Errorf("the image takes %v on %v, want the gateway's linux binaries", d.IDs, d.Platforms)
	}
	if _, err := os.Stat(filepath.Join("../..", d.Dockerfile)); err != nil {
		t.Error(err)
	}
}

// TestReleaseDockerfile: the released image's Dockerfile holds what the
// source-built one does: non-root, the state volume, the health check.
func TestReleaseDockerfile(t *testing.T) {
	d := readDockerfileAt(t, "../release.Dockerfile")
	checkGatewayStage(t, d)
	all := strings.Join(d.stages[len(d.stages)-1].instructions, "\n")
	if !strings.Contains(all, "COPY ${TARGETPLATFORM}/osb-gateway /usr/local/bin/osb-gateway") {
		t.Errorf("the image does not take the release's binary (GoReleaser's <os>/<arch>/osb-gateway):\n%s", all)
	}
}

// imageRef finds references to the released image with their tags.
var imageRef = regexp.MustCompile(regexp.QuoteMeta(image) + `(:[\w.<>${}+-]*[\w>}])?`)

// TestOneImageReference: every file that names the image names it with the
// chart's appVersion; no file names osb-gateway:latest or the old
// unpublished names; each deploy path names the image.
func TestOneImageReference(t *testing.T) {
	want := image + ":" + chartAppVersion(t)
	placeholders := []string{":<version>", ":<tag>", ":<appVersion>", ":${VERSION}", ":$VERSION", ":v<version>", ":vX.Y.Z"}
	var files []string
	for _, root := range []string{"..", "../../docs", "../../README.md", "../../.goreleaser.yaml", "../../.github"} {
		filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() && !strings.HasSuffix(p, ".sum") && filepath.Base(p) != "release_test.go" {
				files = append(files, p)
			}
			return nil
		})
	}
	old := regexp.MustCompile(`osb-gateway:(latest|0\.1\.0)\b`)
	named := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range old.FindAll(raw, -1) {
			t.Errorf("%s: %s", f, m)
		}
		for _, m := range imageRef.FindAllString(string(raw), -1) {
			tag := strings.TrimPrefix(m, image)
			if m == want || tag == "" || slices.Contains(placeholders, tag) {
				named[f] = named[f] || m == want
				continue
			}
			if !strings.HasPrefix(tag, ":") {
				continue
			}
			t.Errorf("%s: %s, want %s (the chart's appVersion)", f, m, want)
		}
	}
	for _, f := range []string{"../kubernetes/osb-gateway.yaml", "../kubernetes/osb-gateway-postgres.yaml", "../Dockerfile", "../release.Dockerfile", "../test/kubernetes_test.go"} {
		if !named[f] {
			t.Errorf("%s does not name %s", f, want)
		}
	}
	// The chart renders it from its values.
	out, err := render(t, testSecrets)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `image: "`+want+`"`) {
		t.Errorf("the chart does not render image %s", want)
	}
}

// TestDockerRunStopTimeout: every docker run shown under deploy/ gives
// docker stop time for the drain (--stop-timeout, at least the mounted
// config's listen.shutdown_delay + shutdown_grace; Docker's default is 10s).
func TestDockerRunStopTimeout(t *testing.T) {
	runs := 0
	filepath.WalkDir("..", func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || strings.HasPrefix(p, "../test") {
			return nil
		}
		raw, _ := os.ReadFile(p)
		for _, line := range strings.Split(string(raw), "\n") {
			_, cmd, ok := strings.Cut(line, "docker run ")
			if !ok || strings.Contains(line, "docker run -p") {
				continue // a mention, not a command
			}
			runs++
			m := regexp.MustCompile(`--stop-timeout[ =](\d+)`).FindStringSubmatch(cmd)
			if m == nil {
				t.Errorf("%s: docker run without --stop-timeout (docker stop would SIGKILL after 10s): %s", p, strings.TrimSpace(line))
				continue
			}
			if strings.Contains(cmd, "deploy/docker/gateway.yaml") {
				var c struct {
					Listen struct {
						ShutdownDelay string `yaml:"shutdown_delay"`
						ShutdownGrace string `yaml:"shutdown_grace"`
					} `yaml:"listen"`
				}
				readYAML(t, "../docker/gateway.yaml", &c)
				need := seconds(t, c.Listen.ShutdownDelay) + seconds(t, c.Listen.ShutdownGrace)
				if got := seconds(t, m[1]+"s"); got < need {
					t.Errorf("%s: --stop-timeout %s is shorter than deploy/docker/gateway.yaml's shutdown_delay + shutdown_grace (%vs)", p, m[1], need)
				}
			}
		}
		return nil
	})
	if runs == 0 {
		t.Fatal("no docker run found under deploy/")
	}
}

func seconds(t *testing.T, d string) float64 {
	t.Helper()
	var n float64
	var unit string
	if _, err := fmt.Sscanf(d, "%f%s", &n, &unit); err != nil || unit != "s" {
		t.Fatalf("%q: not a number of seconds", d)
	}
	return n
}

// TestReleaseDryRun runs the release as a maintainer's dry run does
// (snapshot, no publishing, no image) and checks what it made: the four
// gateway archives and binaries, checksums that verify, an SBOM of each
// binary, and a linux binary for this machine whose version names the
// snapshot and the commit. It takes minutes: set OSB_GATEWAY_TEST_RELEASE=1.
func TestReleaseDryRun(t *testing.T) {
	if os.Getenv("OSB_GATEWAY_TEST_RELEASE") != "1" {
		t.Skip("set OSB_GATEWAY_TEST_RELEASE=1 to run the release dry run (GoReleaser, several minutes)")
	}
	root, _ := filepath.Abs("../..")
	cmd := exec.Command("go", "run", goreleaser, "release", "--snapshot", "--clean", "--skip=publish,docker")
	cmd.Dir = root
	// GoReleaser reads the remote's URL; a checkout without one gets it from
	// the environment (git's GIT_CONFIG_*), nothing is written.
	cmd.Env = append(os.Environ(), "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=remote.origin.url",
		"GIT_CONFIG_VALUE_0=https://github.com/osb-gateway/osb-gateway.git")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("goreleaser: %v\n%s", err, out)
	}
	dist := filepath.Join(root, "dist")
	checkDist(t, dist)
}

// checkDist checks a release's dist/ directory.
func checkDist(t *testing.T, dist string) {
	t.Helper()
	var meta struct {
		Version string `json:"version"`
		Commit  string `json:"commit"`
	}
	raw, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	// Checksums: every line verifies, and every archive and SBOM has one.
	sums, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	summed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("checksums.txt: %q", line)
		}
		data, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
			t.Errorf("checksums.txt: %s does not verify", name)
		}
		summed[name] = true
	}
	for _, osArch := range []string{"linux_amd64", "linux_arm64", "darwin_amd64", "darwin_arm64"} {
		archive := "osb-gateway_" + meta.Version + "_" + osArch + ".tar.gz"
		if !summed[archive] {
			t.Errorf("no checksummed %s", archive)
		}
		sbom := "osb-gateway_" + meta.Version + "_" + osArch + ".cdx.json"
		raw, err := os.ReadFile(filepath.Join(dist, sbom))
		if err != nil {
			t.Error(err)
			continue
		}
		var bom struct {
			BOMFormat  string `json:"bomFormat"`
			Components []any  `json:"components"`
		}
		if err := json.Unmarshal(raw, &bom); err != nil || bom.BOMFormat != "CycloneDX" || len(bom.Components) == 0 {
			t.Errorf("%s: not a CycloneDX SBOM with components (%v)", sbom, err)
		}
	}
	bins, _ := filepath.Glob(filepath.Join(dist, "osb-gateway_*", "osb-gateway"))
	if len(bins) != 4 {
		t.Errorf("%d gateway binaries, want 4: %v", len(bins), bins)
	}
	if runtime.GOOS != "linux" {
		return
	}
	bins, _ = filepath.Glob(filepath.Join(dist, "osb-gateway_linux_"+runtime.GOARCH+"*", "osb-gateway"))
	if len(bins) != 1 {
		t.Fatalf("no linux/%s binary: %v", runtime.GOARCH, bins)
	}
	out, err := exec.Command(bins[0], "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "osb-gateway v" + meta.Version + " (revision " + meta.Commit; !bytes.HasPrefix(out, []byte(want)) {
		t.Errorf("version printed %q, want it to start with %q", out, want)
	}
}
