// Command osb-sample-broker serves the in-memory sample OSB broker of
// internal/samplebroker over plain HTTP, for demos, tests and benchmarks.
//
//	osb-sample-broker -addr 127.0.0.1:8181 -username sample -password secret
//
// The password defaults to $SAMPLE_BROKER_PASSWORD when set. SIGINT or
// SIGTERM shut it down gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// shutdownGrace bounds how long in-flight requests may finish on shutdown.
const shutdownGrace = 10 * time.Second

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "osb-sample-broker:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("osb-sample-broker", flag.ContinueOnError)
	var (
		addr      = fs.String("addr", "127.0.0.1:8181", "listen address, host:port")
		opts      samplebroker.Options
		logFormat = fs.String("log-format", "text", "log format: text or json")
	)
	fs.StringVar(&opts.Username, "username", samplebroker.DefaultUsername, "basic-auth username; empty disables authentication")
	fs.StringVar(&opts.Password, "password", "", "basic-auth password (default $SAMPLE_BROKER_PASSWORD if set, else samplebroker.DefaultPassword)")
	fs.DurationVar(&opts.AsyncDelay, "async-delay", samplebroker.DefaultAsyncDelay, "how long asynchronous operations stay in progress")
	fs.BoolVar(&opts.Legacy, "legacy", false, "behave like an OSB 2.8 broker")
	fs.BoolVar(&opts.Lax, "lax", false, "behave like a careless broker: create twice, never answer 409 or 410, skip org/space checks")
	fs.BoolVar(&opts.AsyncOnlyBindings, "async-only-bindings", false, "answer 422 AsyncRequired to binds and unbinds of the async plan without accepts_incomplete=true")
	fs.DurationVar(&opts.Latency, "latency", 0, "delay added to every /v2 request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if !flagSet(fs, "password") {
		opts.Password = samplebroker.DefaultPassword
		if p, ok := os.LookupEnv("SAMPLE_BROKER_PASSWORD"); ok {
			opts.Password = p
		}
	}
	log, err := newLogger(*logFormat)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           samplebroker.New(opts),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("serving", "addr", ln.Addr().String(), "legacy", opts.Legacy,
		"auth", opts.Username != "", "async_delay", opts.AsyncDelay, "latency", opts.Latency)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

// newLogger returns a slog logger on stderr in the given format.
func newLogger(format string) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, nil)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want text or json", format)
}

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
