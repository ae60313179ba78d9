package main

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watch starts watching the configuration file and the files it names
// (config.Config.WatchedFiles) when reload.watch is on and the server has
// a file, until ctx ends; a change of their contents reloads (trigger
// "watch") once the files were quiet for reload.debounce.
//
// It watches directories, not files: an editor's atomic write (a new file
// renamed over the old one) and a Kubernetes ConfigMap or Secret update
// (a new "..data" symlink renamed over the old one; the file is a symlink
// through it) replace the file, and a watch on the old file would see
// neither the change nor any after it. Events in a directory only start
// the debounce timer; the reload happens when a watched file's contents
// (read through its symlinks) differ from the last read, so that writes of
// other files there (a bolt file beside gateway.yaml) reload nothing.
func (s *server) watch(ctx context.Context) error {
	cfg := s.sw.Load().Config()
	if s.path == "" || !cfg.Reload.Watching() {
		return nil
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	w := &watcher{fs: fw, log: s.log, debounce: cfg.Reload.Debounce, dirs: map[string]bool{},
		files: func() []string {
			return append([]string{s.path}, s.sw.Load().Config().WatchedFiles(filepath.Dir(s.path))...)
		},
		reload: func() { s.reloadLogged("watch") }}
	if err := w.update(); err != nil {
		fw.Close()
		return err
	}
	go w.run(ctx)
	return nil
}

// watcher is the state of one watch; only run's goroutine uses it after
// the first update.
type watcher struct {
	fs       *fsnotify.Watcher
	log      *slog.Logger
	debounce time.Duration
	files    func() []string // the files to watch, from the configuration in force
	reload   func()
	dirs     map[string]bool     // the directories watched
	sums     map[string][32]byte // each watched file's contents when last read; missing: not readable
	names    map[string]bool     // the base names of the watched files, the events worth a look
}

// run waits for events until ctx ends.
func (w *watcher) run(ctx context.Context) {
	defer w.fs.Close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			if w.relevant(ev) {
				timer.Reset(w.debounce)
			}
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			w.log.Warn("watching the configuration files", slog.String("error", err.Error()))
		case <-timer.C:
			if w.refresh() {
				w.reload()
			}
			if err := w.update(); err != nil {
				w.log.Warn("watching the configuration files", slog.String("error", err.Error()))
			}
		}
	}
}

// relevant reports whether ev may have changed a watched file: it names
// one, or it is one of the "..data" entries through which Kubernetes swaps
// a ConfigMap's or Secret's files.
func (w *watcher) relevant(ev fsnotify.Event) bool {
	base := filepath.Base(ev.Name)
	return w.names[base] || strings.HasPrefix(base, "..")
}

// refresh reads the watched files again and reports whether one's contents
// differ from the last read.
func (w *watcher) refresh() bool {
	changed := false
	for name, old := range w.sums {
		if sum, _ := fileSum(name); sum != old {
			w.sums[name], changed = sum, true
		}
	}
	return changed
}

// update follows the configuration in force: its files are watched (a new
// one read now, a dropped one forgotten) through their directories, and no
// other directory is.
func (w *watcher) update() error {
	files := w.files()
	sums, names, dirs := make(map[string][32]byte, len(files)), map[string]bool{}, map[string]bool{}
	for _, f := range files {
		sum, known := w.sums[f]
		if !known {
			sum, _ = fileSum(f)
		}
		sums[f] = sum
		names[filepath.Base(f)] = true
		dirs[filepath.Dir(f)] = true
	}
	w.sums, w.names = sums, names
	var first error
	for d := range dirs {
		if !w.dirs[d] {
			if err := w.fs.Add(d); err != nil && first == nil {
				first = err
				continue
			}
			w.dirs[d] = true
		}
	}
	for d := range w.dirs {
		if !dirs[d] {
			_ = w.fs.Remove(d)
			delete(w.dirs, d)
		}
	}
	return first
}

// fileSum is the SHA-256 of name's contents, read through symlinks; the
// zero sum and false when it cannot be read.
func fileSum(name string) ([32]byte, bool) {
	data, err := os.ReadFile(name)
	if err != nil {
		return [32]byte{}, false
	}
	return sha256.Sum256(data), true
}
