// Command osb-sample-broker serves the sample OSB broker of
// internal/samplebroker over plain HTTP, for demos, tests, benchmarks and
// fault campaigns.
//
//	osb-sample-broker -addr 127.0.0.1:8181 -username sample -password secret
//
// The password defaults to $SAMPLE_BROKER_PASSWORD when set. SIGINT or
// SIGTERM shut it down gracefully. Once it listens it logs "serving" with
// the address (useful with -addr 127.0.0.1:0).
//
// Its state lives in memory unless -state-file names a file: then every
// instance and binding, with their asynchronous operations, is journalled
// there before each answer that changed it, so the broker can be killed
// (kill -9) and restarted on the same file with nothing it answered lost.
// -call-log names a file (created if missing, appended to) that receives
// one JSON line per provision, update, deprovision, bind and unbind call,
// with the calls for the same instance that overlapped it (see
// samplebroker.CallRecord). GET /_sample/holdings answers what it holds.
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
	fs.StringVar(&opts.StateFile, "state-file", "", "file that keeps the broker's state across a crash and restart; empty: memory only")
	callLog := fs.String("call-log", "", "file to append a JSON line to for every mutating call; empty: none")
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

	if *callLog != "" {
		// Unbuffered: each line is one write(2), so a kill -9 loses none
		// that was written.
		f, err := os.OpenFile(*callLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		opts.CallLog = f
	}
	broker, err := samplebroker.Open(opts)
	if err != nil {
		return err
	}
	defer broker.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           broker,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("serving", "addr", ln.Addr().String(), "legacy", opts.Legacy,
		"auth", opts.Username != "", "async_delay", opts.AsyncDelay, "latency", opts.Latency,
		"state_file", opts.StateFile, "call_log", *callLog)
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
