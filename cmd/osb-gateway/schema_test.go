package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestSchemaPrintsCommittedSchema: "osb-gateway schema" prints
// schema/gateway.schema.json as committed (go generate rewrites it).
func TestSchemaPrintsCommittedSchema(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"schema"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	committed, err := os.ReadFile("../../schema/gateway.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), committed) {
		t.Error("osb-gateway schema differs from schema/gateway.schema.json: run go generate ./cmd/osb-gateway")
	}
}

// TestVersionPrintsReleaseStamp: a release binary (-X main.version,
// main.revision, main.date, as .goreleaser.yaml stamps them) prints the
// tag, the revision and the date, whatever the VCS stamp says.
func TestVersionPrintsReleaseStamp(t *testing.T) {
	saved := [3]string{version, revision, date}
	t.Cleanup(func() { version, revision, date = saved[0], saved[1], saved[2] })
	version, revision, date = "v1.2.3", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z"
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := "osb-gateway v1.2.3 (revision 0123456789abcdef0123456789abcdef01234567, 2026-01-02T03:04:05Z, go"
	if !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("version printed %q, want it to start with %q", stdout.String(), want)
	}
}
