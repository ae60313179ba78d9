package osbtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
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

// DeadAddr is a loopback address that refuses every connection for the
// rest of the test: a socket is bound to the port but never listens, so
// the kernel answers a connect with a reset, and no other test or process
// can take the port meanwhile (a port closed after net.Listen could be
// handed to someone else's server between the close and the dial).
func DeadAddr(tb testing.TB) string {
	tb.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		tb.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		tb.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
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
