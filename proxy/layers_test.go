package proxy

import (
	"os/exec"
	"strings"
	"testing"
)

// The layers of the packages under proxy/ (docs/architecture.md): core at
// the bottom, services on it, stages on those, the assembly (package proxy)
// on top. Each package under proxy/internal is listed here with its layer;
// a package missing from the table fails the test, so a new one is placed
// on purpose.
const (
	layerCore     = "core"
	layerService  = "service"
	layerStage    = "stage"
	layerAssembly = "assembly"
)

var layers = map[string]string{
	"proxy":               layerAssembly,
	"proxy/internal/core": layerCore,

	"proxy/internal/accesslog": layerService,
	"proxy/internal/metrics":   layerService,
	"proxy/internal/usage":     layerService,
	"proxy/internal/upstream":  layerService,
	"proxy/internal/catalog":   layerService,
	"proxy/internal/guard":     layerService,
	// what the tests of proxy/ and its packages share: imported by tests only
	"proxy/internal/proxytest": layerService,

	"proxy/internal/auth":     layerStage,
	"proxy/internal/emulate":  layerStage,
	"proxy/internal/request":  layerStage,
	"proxy/internal/observe":  layerStage,
	"proxy/internal/owner":    layerStage,
	"proxy/internal/protect":  layerStage,
	"proxy/internal/routes":   layerStage,
	"proxy/internal/policies": layerStage,
	"proxy/internal/quota":    layerStage,
}

// TestPackageLayers reads the import graph of proxy/... (code and tests)
// and fails on an arrow that points up or sideways: a package under proxy/internal importing
// the assembly, core importing any other package under proxy/, a service or
// the core importing a stage, a stage importing another stage.
func TestPackageLayers(t *testing.T) {
	// Test code counts too: a stage's tests importing another stage tie
	// the two as much as its code would.
	const format = `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`
	out, err := exec.Command("go", "list", "-f", format, "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	const module = "github.com/osb-gateway/osb-gateway/"
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		from, ok := layers[pkg]
		if !ok {
			t.Errorf("%s has no layer: add it to the layers table (and to docs/architecture.md)", pkg)
			continue
		}
		seen++
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module+"proxy") || imp == fields[0] { // a package's external tests import it
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			to, ok := layers[imp]
			if !ok {
				continue // reported as a package of its own
			}
			if why := refused(from, to); why != "" {
				t.Errorf("%s (%s) imports %s (%s): %s", pkg, from, imp, to, why)
			}
		}
	}
	if seen != len(layers) {
		t.Errorf("go list found %d of the %d packages in the layers table: drop the ones that are gone", seen, len(layers))
	}
}

// refused says why a package of layer from may not import one of layer to,
// or "" when it may.
func refused(from, to string) string {
	switch {
	case to == layerAssembly:
		return "nothing under proxy/ imports the assembly"
	case from == layerCore:
		return "the core imports no other package under proxy/"
	case to == layerStage && from == layerStage:
		return "a stage never imports another stage"
	case to == layerStage && from != layerAssembly:
		return "only the assembly imports a stage"
	}
	return ""
}

// TestLayerRules: the arrows refused names, one row per rule, and the
// arrows it lets through.
func TestLayerRules(t *testing.T) {
	for _, c := range []struct {
		name     string
		from, to string
		refused  bool
	}{
		{"assembly imports a stage", layerAssembly, layerStage, false},
		{"assembly imports a service", layerAssembly, layerService, false},
		{"stage imports a service", layerStage, layerService, false},
		{"stage imports the core", layerStage, layerCore, false},
		{"service imports a service", layerService, layerService, false},
		{"service imports the core", layerService, layerCore, false},
		{"stage imports a stage", layerStage, layerStage, true},
		{"service imports a stage", layerService, layerStage, true},
		{"core imports a stage", layerCore, layerStage, true},
		{"core imports a service", layerCore, layerService, true},
		{"core imports the core", layerCore, layerCore, true},
		{"stage imports the assembly", layerStage, layerAssembly, true},
		{"service imports the assembly", layerService, layerAssembly, true},
	} {
		if got := refused(c.from, c.to) != ""; got != c.refused {
			t.Errorf("%s: refused %v, want %v", c.name, got, c.refused)
		}
	}
}
