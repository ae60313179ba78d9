package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/admin"
	"github.com/osb-gateway/osb-gateway/console"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/lean"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/tokenlimit"
	"github.com/osb-gateway/osb-gateway/proxy"
	gwtls "github.com/osb-gateway/osb-gateway/tls"
)

func runServe(args []string, stderr io.Writer) int {
	fs := newFlagSet("serve", "[serve] [-config FILE] [-listen ADDR] [-admin ADDR]\n\n"+
		"Runs the gateway until SIGTERM or SIGINT (after listen.shutdown_delay, then a drain of\n"+
		"listen.shutdown_grace); a change of the file, SIGHUP or POST /admin/reload reloads it.", stderr)
	path := fs.String("config", "gateway.yaml", "the configuration `file`")
	addrs := addrFlags(fs) // serve_addr.go
	if code, ok := parseFlags(fs, args, false); !ok {
		return code
	}
	cfg, err := addrs.load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "osb-gateway: %s: configuration refused:\n%v\n", *path, err)
		return loadExitCode(err)
	}
	logs := newLogs(cfg.Log, stderr)
	srv, err := newServer(cfg, *path, logs)
	if err != nil {
		logs.log.Error("cannot start", slog.String("error", err.Error()))
		return 1
	}
	srv.load = addrs.load     // a reload keeps the addresses the flags gave
	defer logs.access.Close() // the buffered access lines
	srv.runtime = startRuntime(cfg.Runtime, os.LookupEnv, os.DirFS("/"), logs.log)
	defer srv.runtime.stop()
	return srv.runUntilSignal()
}

// server owns the listeners, the live Gateway and its reloads.
type server struct {
	path    string
	log     *slog.Logger
	level   *slog.LevelVar
	access  *proxy.AccessLog
	sw      *proxy.Switch
	console *console.Console // the status pages on the admin listener; nil without one
	main    *http.Server
	lean    *lean.Server // serves mainLn in main's place (listen.server: lean, plain HTTP)
	admin   *http.Server
	mainLn  net.Listener
	adminLn net.Listener
	ready   atomic.Bool
	// draining is set at the first SIGTERM or SIGINT: /readyz answers
	// 503 and answers close their connections while the listeners still
	// accept, for listen.shutdown_delay (rollout.go).
	draining atomic.Bool
	reloads  sync.Mutex // one reload at a time (reload.go)
	// configs counts reloads and labels the info series with hash, the
	// configuration file's hash (under reloads).
	configs *proxy.ConfigMetrics
	hash    string
	// hashOf hashes the configuration file; hashFile unless the demo
	// replaces it.
	hashOf func(path string) string
	// TLS at the platform listener (listenTLS): never nil after newServer;
	// http serves listen.tls.http_address when it is set.
	tls    *gwtls.Server
	http   *http.Server
	httpLn net.Listener
	// load reads the configuration on reload; config.Load unless a test or
	// the demo replaces it.
	load func(path string) (*config.Config, error)
	// st keeps operation locks; stopSweep ends the expiry sweeper.
	st store.Store
	// clock is the state store server's clock the gateway runs on, for a
	// store replicas share; nil for bolt and memory (gatewayClock).
	clock     *store.ServerClock
	sweepCtx  context.Context
	stopSweep context.CancelFunc
	// obs is tracing, metrics and the audit log, set up once.
	obs *observability
	// runtime is the GC policy of runtime.*, which serve and demo apply
	// (runtime.go) and a reload changes; nil in tests of the server.
	runtime *runtimePolicy
}

// newServer builds the Gateway and opens both listeners; it does not serve
// yet.
func newServer(cfg *config.Config, path string, lg logs) (srv *server, err error) {
	log := lg.log
	obs, err := newObservability(cfg, log)
	if err != nil {
		return nil, err
	}
	st, clk, err := openStore(cfg.State, log)
	if err != nil {
		obs.close(context.Background())
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close() // let go of the state file: a retry may open it
			obs.close(context.Background())
		}
	}()
	g, err := proxy.New(cfg, obs.options(proxy.Options{Logger: log, AccessLog: lg.access, Store: st, Now: nowOf(clk)}))
	if err != nil {
		return nil, err
	}
	s := &server{path: path, log: log, level: lg.level, access: lg.access, sw: proxy.NewSwitch(g), st: st, clock: clk, obs: obs,
		load: func(p string) (*config.Config, error) { return config.Load(p) }, hashOf: hashFile}
	if s.configs, err = proxy.NewConfigMetrics(obs.prov.Registerer); err != nil {
		return nil, err
	}
	s.setHash(s.hashOf(path))
	s.sweepCtx, s.stopSweep = context.WithCancel(context.Background())
	obs.observe(s)
	l := cfg.Listen
	s.main = &http.Server{
		Handler:           s.closeWhileDraining(s.sw),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if s.mainLn, err = net.Listen("tcp", l.Address); err != nil {
		return nil, fmt.Errorf("listen.address: %w", err)
	}
	if l.Server != config.ServerLean || l.TLS.Mode != config.TLSModeOff {
		// net/http serves it: a half-closed platform is served, only one
		// gone cancels its request (beneath TLS, which wraps it below).
		s.mainLn = proxy.ServeStandard(s.main, s.mainLn)
	}
	if cfg.Admin.Address != "off" {
		s.admin = &http.Server{
			Handler:           s.adminHandler(),
			ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: l.IdleTimeout,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		if s.adminLn, err = net.Listen("tcp", cfg.Admin.Address); err != nil {
			s.mainLn.Close()
			return nil, fmt.Errorf("admin.address: %w", err)
		}
	}
	if err := s.listenTLS(cfg); err != nil {
		s.mainLn.Close()
		if s.adminLn != nil {
			s.adminLn.Close()
		}
		return nil, err
	}
	if l.Server == config.ServerLean && l.TLS.Mode == config.TLSModeOff {
		s.lean = &lean.Server{
			Handler:           s.main.Handler,
			ReadHeaderTimeout: l.ReadHeaderTimeout,
			ReadTimeout:       l.ReadTimeout,
			WriteTimeout:      l.WriteTimeout,
			IdleTimeout:       l.IdleTimeout,
			MaxHeaderBytes:    l.MaxHeaderBytes,
			ErrorLog:          s.main.ErrorLog,
		}
	}
	return s, nil
}

func (s *server) readiness() error {
	if s.draining.Load() {
		return errShuttingDown
	}
	if !s.ready.Load() {
		return errors.New("listeners are not serving yet, or the gateway is shutting down")
	}
	g := s.sw.Load()
	if err := g.Overloaded(); err != nil {
		return err // listen.max_in_flight calls in flight: the next is shed
	}
	if g.Config().Catalog.RequireWarm {
		return g.CatalogsReady()
	}
	return nil
}

// adminHandler is the admin listener's handler (package admin): health,
// readiness and metrics, open; catalog, operation, orphan, inventory,
// reload and profile control under /admin/, behind admin.token; the
// console's pages beside them. Both work on the one proxy.View and share
// one limit of refused admin tokens per client address: a guess counts
// whether it is a bearer token or a login. The console keeps its sessions
// in the state store.
func (s *server) adminHandler() http.Handler {
	view := proxy.NewView(s.sw)
	tokens := tokenlimit.New(view.Now)
	a := admin.New(view, admin.Options{Ready: s.readiness, Log: s.log, Tokens: tokens,
		Reload: func(context.Context) (admin.Reloaded, error) { return s.reloadFrom("admin") }})
	a.LogAccess(s.access, nil)
	a.Handle("GET /metrics", s.obs.prov.MetricsHandler())
	// The sessions live in the state store: replicas sharing it share
	// the logins (a login on one works on all, a logout ends it on all).
	s.console = console.New(console.Options{View: view, Gatherer: s.obs.prov.Gatherer, Log: s.log, Tokens: tokens, Sessions: s.st})
	for _, p := range console.Patterns {
		a.Handle(p, s.console)
	}
	return a
}

// warm fetches every broker's catalog in the background when catalog.warm
// is set; failures are logged (the cache retries on demand).
func (s *server) warm(g *proxy.Gateway) {
	if !g.Config().Catalog.Warm {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := g.WarmCatalogs(ctx); err != nil {
			// The catalog cache logged each failed fetch once, with its
			// cause; its error is not logged again.
			s.log.Warn("catalogs not all warmed; platform calls fetch them again")
			return
		}
		s.log.Info("catalogs warmed", slog.Int("brokers", len(g.Config().Brokers)))
	}()
}

// serve serves both listeners until shutdown; it returns the first serve
// error other than http.ErrServerClosed.
func (s *server) serve() error {
	if err := s.tls.Start(context.Background()); err != nil {
		return fmt.Errorf("listen.tls: %w", err)
	}
	errc := make(chan error, 3)
	n := 1
	if s.lean != nil {
		go func() { errc <- s.lean.Serve(s.mainLn) }()
	} else {
		go func() { errc <- s.main.Serve(s.mainLn) }()
	}
	if s.admin != nil {
		n++
		go func() { errc <- s.admin.Serve(s.adminLn) }()
	}
	if s.http != nil {
		n++
		go func() { errc <- s.http.Serve(s.httpLn) }()
	}
	s.ready.Store(true)
	s.warm(s.sw.Load())
	go runClock(s.sweepCtx, s.clock, s.log)
	go sweep(s.sweepCtx, s.sw, s.sw.Load().Config().State.SweepTick())
	if s.console != nil {
		go s.console.Run(s.sweepCtx, 0)
	}
	attrs := []any{slog.String("listen", s.mainLn.Addr().String()), slog.String("config", s.path),
		slog.String("version", version), slog.String("tls", s.tls.Mode()), slog.String("server", s.serverKind())}
	if s.httpLn != nil {
		attrs = append(attrs, slog.String("http", s.httpLn.Addr().String()))
	}
	if s.adminLn != nil {
		attrs = append(attrs, slog.String("admin", s.adminLn.Addr().String()))
	}
	s.log.Info("serving", attrs...)
	var first error
	for range n {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
			go s.shutdown(context.Background()) // one listener failed: stop the other
		}
	}
	return first
}

// serverKind names what serves the platform listener, for the log.
func (s *server) serverKind() string {
	if s.lean != nil {
		return config.ServerLean
	}
	return config.ServerStandard
}

// shutdown stops accepting, then waits for in-flight requests until ctx
// ends; what is still running then is cut.
func (s *server) shutdown(ctx context.Context) error {
	s.ready.Store(false)
	var err error
	if s.lean != nil {
		if e := s.lean.Shutdown(ctx); e != nil {
			err = e
			s.lean.Close()
		}
	} else if e := s.main.Shutdown(ctx); e != nil {
		err = e
		s.main.Close()
	}
	if s.admin != nil {
		if e := s.admin.Shutdown(ctx); e != nil {
			s.admin.Close()
		}
	}
	if s.http != nil {
		if e := s.http.Shutdown(ctx); e != nil {
			s.http.Close()
		}
	}
	s.tls.Close()
	s.sw.Load().Close(nil)
	s.access.Close() // write the buffered access lines
	s.stopSweep()
	if s.st != nil {
		s.st.Close()
	}
	s.obs.close(ctx)
	return err
}

// listenTLS sets up TLS at the platform listener as listen.tls says: it
// wraps s.mainLn (mode off leaves it plain), gives s.main the TLS config
// (so that it speaks HTTP/2), opens listen.tls.http_address for ACME
// HTTP-01 challenges and redirects, and logs the TLS warnings.
func (s *server) listenTLS(cfg *config.Config) error {
	l := cfg.Listen
	t, err := gwtls.NewServer(l.TLS, l.Address, gwtls.Options{Logger: s.log})
	if err != nil {
		return fmt.Errorf("listen.tls: %w", err)
	}
	if l.TLS.HTTPAddress != "" {
		if s.httpLn, err = net.Listen("tcp", l.TLS.HTTPAddress); err != nil {
			t.Close()
			return fmt.Errorf("listen.tls.http_address: %w", err)
		}
		s.http = &http.Server{Handler: t.HTTPHandler(), ReadHeaderTimeout: l.ReadHeaderTimeout,
			ReadTimeout: l.ReadTimeout, WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout,
			MaxHeaderBytes: l.MaxHeaderBytes, ErrorLog: s.main.ErrorLog}
	}
	s.tls, s.main.TLSConfig, s.mainLn = t, t.Config(), t.Wrap(s.mainLn)
	logTLSWarnings(s.log, cfg)
	return nil
}

// logTLSWarnings logs what gwtls.Warnings finds in cfg (plain HTTP beyond
// loopback, brokers whose certificates are not verified) and what
// config.Warnings finds (weak plain-text passwords).
func logTLSWarnings(log *slog.Logger, cfg *config.Config) {
	for _, w := range gwtls.Warnings(cfg) {
		log.Warn("insecure TLS setting", slog.String("warning", w))
	}
	for _, w := range config.Warnings(cfg) {
		log.Warn("weak configuration", slog.String("warning", w))
	}
}
