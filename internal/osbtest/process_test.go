package osbtest

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	RemoveBuilt()
	os.Exit(code)
}

func TestFreeAddr(t *testing.T) {
	addr := FreeAddr(t)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("cannot listen on the free address %s: %v", addr, err)
	}
	ln.Close()
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Errorf("address %s is not on loopback", addr)
	}
}

func TestGatewayBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := GatewayBinary(t)
	if again := GatewayBinary(t); again != bin {
		t.Errorf("second call built %s again, want the first build %s", again, bin)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "osb-gateway") {
		t.Errorf("%s version: %v: %s", bin, err, out)
	}
}
