package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// The manual: the README is the front door, docs/ holds one page per task.
const (
	readmeMaxLines = 300
	docsMaxLines   = 600
)

// manualPages lists README.md and docs/*.md, relative to the repository.
func manualPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no pages in docs/")
	}
	return append([]string{"../../README.md"}, pages...)
}

// repoPath names a page by its path in the repository.
func repoPath(p string) string {
	r, err := filepath.Rel("../..", p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}

// proseLines returns the lines of a Markdown file outside fenced code
// blocks, with their line numbers.
func proseLines(raw []byte) (lines []string, numbers []int) {
	fenced := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			lines = append(lines, line)
			numbers = append(numbers, n)
		}
	}
	return lines, numbers
}

var (
	headingRE  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	codeSpanRE = regexp.MustCompile("`[^`]*`")
	linkRE     = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)
)

// slug is GitHub's anchor for a heading: lower case, inline-code and link
// markup gone, every character but letters, digits, marks, '_', '-' and
// spaces dropped, spaces turned into '-'.
func slug(heading string) string {
	heading = linkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the heading anchors of a Markdown file, a repeated one
// with GitHub's -1, -2, … suffixes.
func anchors(raw []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines, _ := proseLines(raw)
	for _, line := range lines {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// TestDocsLength: the README stays a front door and no page of the manual
// grows past what a reader takes in at once.
func TestDocsLength(t *testing.T) {
	for _, p := range manualPages(t) {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		limit := docsMaxLines
		if repoPath(p) == "README.md" {
			limit = readmeMaxLines
		}
		if n := bytes.Count(raw, []byte("\n")); n > limit {
			t.Errorf("%s: %d lines, at most %d", repoPath(p), n, limit)
		}
	}
}

// TestDocsLinks: every relative link of the README and docs/ reaches a
// file, and every #fragment a heading of the page it names.
func TestDocsLinks(t *testing.T) {
	anchorsOf := map[string]map[string]bool{}
	pageAnchors := func(path string) (map[string]bool, error) {
		if a, ok := anchorsOf[path]; ok {
			return a, nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		anchorsOf[path] = anchors(raw)
		return anchorsOf[path], nil
	}
	checked := 0
	for _, p := range manualPages(t) {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines, numbers := proseLines(raw)
		for i, line := range lines {
			for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(line, "code"), -1) {
				target := m[2]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := fmt.Sprintf("%s:%d: link %q", repoPath(p), numbers[i], target)
				file, frag, _ := strings.Cut(target, "#")
				dest := p
				if file != "" {
					dest = filepath.Join(filepath.Dir(p), filepath.FromSlash(file))
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: no such file %s", where, repoPath(dest))
					continue
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s: a fragment on a file that is not Markdown", where)
					continue
				}
				a, err := pageAnchors(dest)
				if err != nil {
					t.Fatal(err)
				}
				if !a[frag] {
					t.Errorf("%s: %s has no heading with the anchor #%s", where, repoPath(dest), frag)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked only %d links; is the link pattern still right?", checked)
	}
}

// TestSlug: GitHub's anchors of headings the manual has.
func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Quick start": "quick-start",
		"The platform listener's server: `lean` or `standard`": "the-platform-listeners-server-lean-or-standard",
		"Overload: `listen.max_in_flight`":                     "overload-listenmax_in_flight",
		"Inventory (storage)":                                  "inventory-storage",
		"Performance notes (moved from the README)":            "performance-notes-moved-from-the-readme",
		"Old brokers: what is dropped, forwarded or refused":   "old-brokers-what-is-dropped-forwarded-or-refused",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// readmeSection returns the lines of README.md from the heading to the
// next heading of the same level.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q", heading)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// fencedBlocks returns the fenced code blocks of a Markdown text whose
// info string is lang.
func fencedBlocks(text, lang string) []string {
	var out []string
	for {
		_, rest, ok := strings.Cut(text, "```"+lang+"\n")
		if !ok {
			return out
		}
		block, after, _ := strings.Cut(rest, "```\n")
		out = append(out, block)
		text = after
	}
}

// minimalEnv reads the variables the README's "Front your own broker"
// exports, and sets them for the test.
func minimalEnv(t *testing.T, section string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, block := range fencedBlocks(section, "sh") {
		for _, line := range strings.Split(block, "\n") {
			rest, ok := strings.CutPrefix(line, "export ")
			if !ok {
				continue
			}
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
				t.Setenv(k, v)
			}
		}
	}
	for _, k := range []string{"BROKER_USERNAME", "BROKER_PASSWORD", "PLATFORM_PASSWORD"} {
		if env[k] == "" {
			t.Fatalf("the README's \"Front your own broker\" exports no %s (exports: %v)", k, env)
		}
	}
	return env
}

// TestMinimalExampleAsDocumented: the README shows examples/minimal.yaml
// as it is; with the variables the README exports, check -offline passes,
// and a gateway built from the file answers the README's curl with the
// sample broker's catalog.
func TestMinimalExampleAsDocumented(t *testing.T) {
	const path = "../../examples/minimal.yaml"
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	section := readmeSection(t, "## Front your own broker")
	if shown := fencedBlocks(section, "yaml"); len(shown) != 1 || shown[0] != string(file) {
		t.Errorf("the README's \"Front your own broker\" does not show examples/minimal.yaml as it is")
	}
	env := minimalEnv(t, section)
	const catalogPath = "/cf/mybroker/v2/catalog"
	if !strings.Contains(section, "curl -s -u cf:\"$PLATFORM_PASSWORD\" -H 'X-Broker-API-Version: 2.17' http://127.0.0.1:8080"+catalogPath) {
		t.Errorf("the README's curl is not the request this test sends (GET %s as cf)", catalogPath)
	}

	var stdout, stderr bytes.Buffer
	if code := runCheck([]string{"-offline", "-config", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("check -offline -config examples/minimal.yaml: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if want := "examples/minimal.yaml: valid (1 tenant, 1 broker, 1 route)"; !strings.Contains(section, want) || !strings.Contains(stdout.String(), "valid (1 tenant, 1 broker, 1 route)") {
		t.Errorf("check prints %q; the README says %q", stdout.String(), want)
	}

	// The sample broker stands where minimal.yaml expects the broker; the
	// listeners move to free ports, the bolt file into a temporary
	// directory (paths are relative to the configuration file).
	broker := httptest.NewServer(samplebroker.New(samplebroker.Options{Username: env["BROKER_USERNAME"], Password: env["BROKER_PASSWORD"]}))
	defer broker.Close()
	if !bytes.Contains(file, []byte("url: http://127.0.0.1:8181")) {
		t.Fatal("examples/minimal.yaml does not name the sample broker's address")
	}
	cfgPath := filepath.Join(t.TempDir(), "minimal.yaml")
	if err := os.WriteFile(cfgPath, bytes.Replace(file, []byte("http://127.0.0.1:8181"), []byte(broker.URL), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	noDelay := time.Duration(0)
	cfg.Listen.Address, cfg.Admin.Address, cfg.Listen.ShutdownDelay = "127.0.0.1:0", "127.0.0.1:0", &noDelay
	s, err := newServer(cfg, cfgPath, newLogs(cfg.Log, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.shutdown(ctx)
		<-done
	})
	waitReady(t, "http://"+s.adminLn.Addr().String())

	get := func(url, user, pass string) (int, []byte) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(user, pass)
		req.Header.Set("X-Broker-API-Version", "2.17")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, body
	}
	status, body := get("http://"+s.mainLn.Addr().String()+catalogPath, "cf", env["PLATFORM_PASSWORD"])
	_, direct := get(broker.URL+"/v2/catalog", env["BROKER_USERNAME"], env["BROKER_PASSWORD"])
	if status != http.StatusOK || !bytes.Equal(body, direct) {
		t.Errorf("GET %s through the gateway: %d %s\nwant 200 and the broker's catalog %s", catalogPath, status, body, direct)
	}
}

// TestScrapeConfigInDocs: the Prometheus scrape config of
// docs/observability.md scrapes /metrics under a job name the alert rules
// match, and promtool (where installed) accepts it with the shipped rules.
func TestScrapeConfigInDocs(t *testing.T) {
	raw, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- scrape config: checked by TestScrapeConfigInDocs")
	blocks := fencedBlocks(rest, "yaml")
	if !ok || len(blocks) == 0 {
		t.Fatal("docs/observability.md has no scrape config after its marker")
	}
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName     string `yaml:"job_name"`
			MetricsPath string `yaml:"metrics_path"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(blocks[0]), &prom); err != nil {
		t.Fatal(err)
	}
	alerts, err := os.ReadFile("../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(alerts, []byte(`up{job=~".*osb-gateway.*"}`)) {
		t.Fatal("deploy/prometheus/alerts.yaml no longer matches jobs by .*osb-gateway.*; update the scrape config's job name and this test")
	}
	if len(prom.ScrapeConfigs) == 0 || len(prom.RuleFiles) != 1 {
		t.Fatalf("want scrape configs and one rule file, got %+v", prom)
	}
	for _, sc := range prom.ScrapeConfigs {
		if !strings.Contains(sc.JobName, "osb-gateway") || sc.MetricsPath != "/metrics" {
			t.Errorf("job %q scrapes %q: want a job name containing osb-gateway, scraping /metrics", sc.JobName, sc.MetricsPath)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed; the scrape config was decoded, not checked by Prometheus")
	}
	rules, err := filepath.Abs("../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(file, []byte(strings.Replace(blocks[0], prom.RuleFiles[0], rules, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check config: %v\n%s", err, out)
	}
}

// TestTestCommandAgrees: docs/testing.md shows the test command the
// README's quick start gives (its second command), so a change of one
// shows in the other.
func TestTestCommandAgrees(t *testing.T) {
	blocks := fencedBlocks(readmeSection(t, "## Quick start"), "sh")
	if len(blocks) == 0 {
		t.Fatal("the README's quick start has no sh block")
	}
	lines := strings.Split(strings.TrimSpace(blocks[0]), "\n")
	if len(lines) < 2 {
		t.Fatalf("the README's quick start has %d commands, want the demo and the test command", len(lines))
	}
	cmd, _, _ := strings.Cut(lines[1], "   # ")
	cmd = strings.TrimSpace(cmd)
	doc, err := os.ReadFile("../../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "\n"+cmd+"\n") {
		t.Errorf("docs/testing.md does not show the README's test command:\n%s", cmd)
	}
}
