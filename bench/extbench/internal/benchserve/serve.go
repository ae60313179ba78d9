// Package benchserve serves extbench's upstream and bare proxy processes
// with the gateway's default platform-facing server settings, so that
// between them and the gateway only the handlers differ.
package benchserve

import (
	"fmt"
	"net"
	"net/http"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
)

// Serve listens on addr, prints the address it got as the first line of
// standard output (extbench reads it), and serves h until it fails.
func Serve(addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	return reference.NewServer(h).Serve(ln)
}
