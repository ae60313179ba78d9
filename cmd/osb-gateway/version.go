package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version, revision and date are stamped at build time by the release
// (.goreleaser.yaml):
//
//	-ldflags "-X main.version=v1.2.3 -X main.revision=<commit> -X main.date=<commit time, RFC 3339>"
//
// When version is not stamped, init sets it to the module version from the
// build information ("(devel)" for a build in a source tree, v1.2.3 for go
// install module@v1.2.3); revision and date then come from the VCS stamp
// Go writes into the binary, when there is one. The start-up log and
// telemetry's service.version use version.
var (
	version  = ""
	revision = ""
	date     = ""
)

func init() {
	if version == "" {
		version = readBuildInfo().Version
	}
}

// buildInfo is what "osb-gateway version" prints, read once from the
// binary's build information.
type buildInfo struct {
	Version  string // -X main.version, else the module version ("(devel)" in a source tree)
	Revision string // -X main.revision, else vcs.revision with "-dirty" when vcs.modified; "unknown" without either
	Time     string // -X main.date, else vcs.time, or ""
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
		return b.stamped()
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
	return b.stamped()
}

// stamped overrides the VCS stamp with the release's -X values, which a
// -trimpath build from a release tarball or with -buildvcs=false lacks.
func (b buildInfo) stamped() buildInfo {
	if revision != "" {
		b.Revision = revision
	}
	if date != "" {
		b.Time = date
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
