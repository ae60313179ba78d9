package main

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"reflect"

	"github.com/osb-gateway/osb-gateway/admin"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// hashLen is how many hex digits of the file's SHA-256 label
// osb_gateway_config_info and the reload answer: enough to tell two
// versions of one file apart.
const hashLen = 12

// hashFile returns the first hashLen hex digits of the SHA-256 of the file
// at path, or "unreadable" when it cannot be read.
func hashFile(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "unreadable"
	}
	return hashBytes(data)
}

func hashBytes(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:hashLen]
}

// setHash records the hash of the configuration in force (under
// s.reloads, or before serving).
func (s *server) setHash(h string) {
	s.hash = h
	s.configs.SetHash(h)
}

// reload reloads the configuration as SIGHUP does; see reloadFrom.
func (s *server) reload() error {
	_, err := s.reloadFrom("sighup")
	return err
}

// reloadFrom reads the certificate files and the configuration again and
// swaps in a new Gateway; trigger ("sighup", "watch", "admin") is logged.
// A file that does not load keeps the running Gateway; the error names
// every problem, and the caller logs or answers it. Certificate files that
// do not load keep the certificate in service and are logged, not
// returned: the configuration is reloaded all the same. Listener addresses
// and timeouts need a restart; a change is logged. Every call counts in
// osb_gateway_config_reload_total.
func (s *server) reloadFrom(trigger string) (admin.Reloaded, error) {
	s.reloads.Lock()
	defer s.reloads.Unlock()
	if err := s.tls.Reload(); err != nil { // listen.tls.mode files; nil in the other modes
		s.log.Error("certificate files not loaded; the previous certificate stays in service",
			slog.String("trigger", trigger), slog.String("error", err.Error()))
	}
	hash := s.hashOf(s.path) // before the load: a change after it is seen again by the watch
	cfg, err := s.load(s.path)
	if err != nil {
		s.configs.Reloaded(false)
		return admin.Reloaded{}, err
	}
	old := s.sw.Load()
	g, err := proxy.New(cfg, s.obs.options(proxy.Options{Logger: s.log, AccessLog: s.access, Previous: old, Now: nowOf(s.clock)}))
	if err != nil {
		s.configs.Reloaded(false)
		return admin.Reloaded{}, err
	}
	if !sameListen(cfg.Listen, old.Config().Listen) || cfg.Admin != old.Config().Admin {
		s.log.Warn("listen and admin settings changed; they take effect at the next restart")
	}
	logTLSWarnings(s.log, cfg)
	setLevel(s.level, cfg.Log.Level)
	s.runtime.reload(cfg.Runtime) // runtime.go
	if !reflect.DeepEqual(cfg.State, old.Config().State) || !reflect.DeepEqual(cfg.Telemetry, old.Config().Telemetry) ||
		!reflect.DeepEqual(cfg.Audit, old.Config().Audit) || !reflect.DeepEqual(cfg.Reload, old.Config().Reload) {
		s.log.Warn("state, telemetry, audit or reload settings changed; they take effect at the next restart")
	}
	s.sw.Store(g)
	old.Close(g)
	s.warm(g)
	s.setHash(hash)
	s.configs.Reloaded(true)
	s.log.Info("configuration reloaded", slog.String("config", s.path), slog.String("trigger", trigger),
		slog.String("hash", hash), slog.Int("tenants", len(cfg.Tenants)), slog.Int("brokers", len(cfg.Brokers)))
	return admin.Reloaded{Result: proxy.ReloadSuccess, ConfigHash: hash, Tenants: len(cfg.Tenants), Brokers: len(cfg.Brokers)}, nil
}

// sameListen reports whether two listen sections need the same listener:
// max_in_flight is the Gateway's own and a reload applies it;
// shutdown_delay and shutdown_grace are read at SIGTERM.
func sameListen(a, b config.Listen) bool {
	a.MaxInFlight, b.MaxInFlight = 0, 0
	a.ShutdownDelay, b.ShutdownDelay = nil, nil
	a.ShutdownGrace, b.ShutdownGrace = 0, 0
	return reflect.DeepEqual(a, b)
}

// reloadLogged reloads from trigger and logs a refusal.
func (s *server) reloadLogged(trigger string) {
	if _, err := s.reloadFrom(trigger); err != nil {
		s.log.Error("reload refused; the running configuration stays", slog.String("config", s.path),
			slog.String("trigger", trigger), slog.String("error", err.Error()))
	}
}
