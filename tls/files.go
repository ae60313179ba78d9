package tls

import (
	"context"
	cryptotls "crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// certFiles serves a certificate and key read from PEM files and reads
// them again when they change. Handshakes read the current pair through
// an atomic pointer, so a reload never blocks or drops a connection:
// connections already open keep the certificate they were made with.
//
// A pair that does not load (a half-written file, a key that belongs to
// another certificate) is refused and the previous pair stays in service;
// the next change is tried again.
type certFiles struct {
	certFile, keyFile string
	log               *slog.Logger

	cur  atomic.Pointer[cryptotls.Certificate]
	mu   sync.Mutex     // serializes loads; guards seen
	seen [2]os.FileInfo // the files as they were at the last load attempt
}

// newCertFiles loads the pair once; an error names the files and cause.
func newCertFiles(certFile, keyFile string, log *slog.Logger) (*certFiles, error) {
	f := &certFiles{certFile: certFile, keyFile: keyFile, log: log}
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

// getCertificate is the tls.Config.GetCertificate of files mode.
func (f *certFiles) getCertificate(*cryptotls.ClientHelloInfo) (*cryptotls.Certificate, error) {
	return f.cur.Load(), nil
}

// load reads both files and, when they make a valid pair, serves it from
// now on. The files are looked at before they are read, so that a change
// made while reading is seen by the next poll.
func (f *certFiles) load() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = f.stat()
	cert, err := cryptotls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("loading certificate %s and key %s: %w", f.certFile, f.keyFile, err)
	}
	f.cur.Store(&cert)
	return nil
}

// stat returns the files' FileInfo; nil for a file that cannot be seen.
func (f *certFiles) stat() [2]os.FileInfo {
	var st [2]os.FileInfo
	for i, name := range []string{f.certFile, f.keyFile} {
		st[i], _ = os.Stat(name) // a missing file counts as a change once it is back
	}
	return st
}

// changed reports whether either file differs from the last load attempt:
// another file (replaced by rename, or a Kubernetes secret's symlink
// swap), another size or another modification time.
func (f *certFiles) changed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.stat()
	for i := range now {
		a, b := f.seen[i], now[i]
		if (a == nil) != (b == nil) {
			return true
		}
		if a != nil && (!os.SameFile(a, b) || a.Size() != b.Size() || !a.ModTime().Equal(b.ModTime())) {
			return true
		}
	}
	return false
}

// reload loads the pair and logs a success; why names the trigger. On
// error the previous certificate stays in service and the caller logs.
func (f *certFiles) reload(why string) error {
	if err := f.load(); err != nil {
		return err
	}
	f.logCert("certificate reloaded", slog.String("trigger", why))
	return nil
}

// logServing logs the certificate in service, with a warning when it
// ends within ExpiryWarning.
func (f *certFiles) logServing() { f.logCert("serving certificate files") }

// logCert logs msg with the current certificate's subject, end and
// serial; at warning level when it ends within ExpiryWarning.
func (f *certFiles) logCert(msg string, attrs ...any) {
	attrs = append(attrs, slog.String("cert_file", f.certFile))
	level := slog.LevelInfo
	if leaf := f.cur.Load().Leaf; leaf != nil {
		attrs = append(attrs, slog.String("subject", leaf.Subject.String()),
			slog.Time("not_after", leaf.NotAfter), slog.String("serial", leaf.SerialNumber.Text(16)))
		if time.Until(leaf.NotAfter) < ExpiryWarning {
			level, msg = slog.LevelWarn, msg+"; the certificate ends within 30 days"
		}
	}
	f.log.Log(context.Background(), level, msg, attrs...)
}

// watch polls the files every interval until ctx ends and reloads them
// when they change.
func (f *certFiles) watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !f.changed() {
				continue
			}
			if err := f.reload("files changed"); err != nil {
				f.log.Error("certificate files not loaded; the previous certificate stays in service",
					slog.String("trigger", "files changed"), slog.String("error", err.Error()))
			}
		}
	}
}
