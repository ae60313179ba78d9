package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=…"; when it
// is not, init sets it to the module version from the build information
// ("(devel)" for a build in a source tree, v1.2.3 for go install
// module@v1.2.3). The start-up log and telemetry's service.version use it.
var version = ""

func init() {
	if version == "" {
		version = readBuildInfo().Version
	}
}

// buildInfo is what "osb-gateway version" prints, read once from the
// binary's build information.
type buildInfo struct {
	Version  string // -X main.version, else the module version ("(devel)" in a source tree)
	Revision string // vcs.revision, with "-dirty" when vcs.modified; "unknown" without VCS stamping
	Time     string // vcs.time, or ""
	Go       string // the Go version and platform
}

// readBuildInfo reads the version and VCS stamp from debug.ReadBuildInfo.
// A binary built with -buildvcs=false (or outside a repository) has no
// revision; go install module@version has a module version but no
// revision.
func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Revision: "unknown", Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if b.Version == "" {
			b.Version = "(unknown)"
		}
		return b
	}
	if b.Version == "" {
		b.Version = bi.Main.Version
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && b.Revision != "unknown" {
		b.Revision += "-dirty"
	}
	if b.Version == "" {
		b.Version = "(devel)"
	}
	return b
}

// String is the one line "osb-gateway version" prints and the start-up
// log names.
func (b buildInfo) String() string {
	s := fmt.Sprintf("osb-gateway %s (revision %s", b.Version, b.Revision)
	if b.Time != "" {
		s += ", " + b.Time
	}
	return s + ", " + b.Go + ")"
}

// runVersion prints the version line.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", "version", stderr)
	if code, ok := parseFlags(fs, args, false); !ok {
		return code
	}
	fmt.Fprintln(stdout, readBuildInfo())
	return exitOK
}
