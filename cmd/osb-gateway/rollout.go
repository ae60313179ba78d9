package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// errShuttingDown is what /readyz says from the first SIGTERM or SIGINT on.
var errShuttingDown = errors.New("shutting down: the listeners accept until listen.shutdown_delay ends, then drain")

// runUntilSignal serves until SIGINT or SIGTERM, reloading on SIGHUP, and
// returns the exit code; see run.
func (s *server) runUntilSignal() int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	return s.run(sigs)
}

// run serves, watching the configuration files when reload.watch says
// so, until a SIGTERM or SIGINT comes on sigs (SIGHUP reloads), then stops
// as stop says, and returns the exit code: 0 after a clean stop, 1 when a
// listener failed or the drain was cut short.
func (s *server) run(sigs <-chan os.Signal) int {
	done := make(chan error, 1)
	go func() { done <- s.serve() }()
	ctx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	if err := s.watch(ctx); err != nil {
		s.log.Warn("the configuration files are not watched; SIGHUP and POST /admin/reload still reload",
			slog.String("error", err.Error()))
	}
	for {
		select {
		case err := <-done:
			if err != nil {
				s.log.Error("serving failed", slog.String("error", err.Error()))
				return 1
			}
			return 0
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				s.reloadLogged("sighup")
				continue
			}
			stopWatch()
			return s.stop(sig, sigs, done)
		}
	}
}

// stop is the rollout-safe shutdown after the first SIGTERM or SIGINT:
//
//  1. /readyz answers 503 at once, so that load balancers and Kubernetes
//     take the gateway out of their endpoints;
//  2. for listen.shutdown_delay the listeners keep accepting and serving
//     (what is sent before the endpoints are updated still gets an
//     answer); answers close their HTTP/1 connections, so that clients
//     reconnect through the load balancer. A second SIGTERM or SIGINT ends
//     the delay early;
//  3. the listeners close and in-flight requests get listen.shutdown_grace
//     to finish; what still runs then is cut (exit 1).
//
// done is serve's result.
func (s *server) stop(sig os.Signal, sigs <-chan os.Signal, done <-chan error) int {
	l := s.sw.Load().Config().Listen
	delay, grace := time.Duration(0), l.ShutdownGrace
	if l.ShutdownDelay != nil {
		delay = *l.ShutdownDelay
	}
	s.draining.Store(true)
	s.log.Info("shutting down", slog.String("signal", sig.String()), slog.Duration("delay", delay), slog.Duration("grace", grace))
	if delay > 0 {
		timer := time.NewTimer(delay)
		defer timer.Stop()
	wait:
		for {
			select {
			case <-timer.C:
				break wait
			case sig := <-sigs:
				if sig == syscall.SIGHUP {
					s.reloadLogged("sighup")
					continue
				}
				s.log.Info("second signal: the delay is cut short, draining now", slog.String("signal", sig.String()))
				break wait
			case err := <-done: // a listener failed; serve shut the others down
				if err == nil {
					return 0
				}
				s.log.Error("serving failed", slog.String("error", err.Error()))
				return 1
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	err := s.shutdown(ctx)
	cancel()
	<-done
	if err != nil {
		s.log.Warn("grace period over; remaining requests were cut", slog.String("error", err.Error()))
		return 1
	}
	s.log.Info("stopped")
	return 0
}

// closeWhileDraining wraps the platform listener's handler: once draining,
// each answer tells its HTTP/1 client to close the connection, so that the
// next call goes through the load balancer to another replica. Before
// that it costs one atomic load.
func (s *server) closeWhileDraining(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
