// Package benchserve serves extbench's upstream and bare proxy processes
// with the gateway's default platform-facing server settings, so that
// between them and the gateway only the handlers differ.
package benchserve

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// Serve listens on addr, prints the address it got as the first line of
// standard output (extbench reads it), and serves h until it fails.
func Serve(addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	var c config.Config
	c.ApplyDefaults()
	l := c.Listen
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn),
	}
	return srv.Serve(ln)
}
