package proxy

import (
	"fmt"
	"os"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// TestMain runs the package's tests on the broker transport named by
// OSB_GATEWAY_TEST_TRANSPORT (standard or lean; unset: each broker's own),
// so that the whole suite passes on both.
func TestMain(m *testing.M) {
	switch v := os.Getenv("OSB_GATEWAY_TEST_TRANSPORT"); v {
	case "", config.TransportStandard, config.TransportLean:
		suiteTransport = v
	default:
		fmt.Fprintf(os.Stderr, "OSB_GATEWAY_TEST_TRANSPORT=%q: want standard or lean\n", v)
		os.Exit(2)
	}
	os.Exit(m.Run())
}
