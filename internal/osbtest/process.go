package osbtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// FreeAddr returns a loopback address nothing listens on right now, for a
// process the test starts to listen on. Another process may take it first;
// a test that cannot tolerate that listens on 127.0.0.1:0 itself.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// built is the gateway binary of this test process, built once.
var built struct {
	once      sync.Once
	dir, path string
	err       error
}

// GatewayBinary builds cmd/osb-gateway once per test process and returns
// the binary's path. The package's TestMain calls RemoveBuilt after
// m.Run, so the binary does not outlive the run.
func GatewayBinary(tb testing.TB) string {
	tb.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "osb-gateway-bin"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "osb-gateway")
		out, err := exec.Command("go", "build", "-o", built.path, "github.com/osb-gateway/osb-gateway/cmd/osb-gateway").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		tb.Fatal(built.err)
	}
	return built.path
}

// RemoveBuilt removes what GatewayBinary built, if anything.
func RemoveBuilt() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}
