package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The chain itself cannot show records cut off the end of the newest
// file: what is left is a shorter chain, intact. So the file sink keeps
// the chain's head — the current file, how many records it holds, the
// hash of the last — where the file's own writes cannot rewind it: in a
// head file beside it (HeadPath), replaced atomically (a temporary file
// renamed over it) after each flush and sync, and through Options.OnHead
// in the gateway's log at an interval. Verify compares the files with a
// head: a file cut short has fewer records than its head names.
//
// Whoever can rewrite the head file as well as the audit file can hide a
// cut; the logged heads, kept elsewhere, are the check against that.

// headSuffix names the head file: the audit file's path plus it.
const headSuffix = ".head"

// HeadPath returns the head file of the audit file at path.
func HeadPath(path string) string { return path + headSuffix }

// Head is the chain's head as the file sink last made it durable.
type Head struct {
	// File is the base name of the current audit file (audit.path).
	File string `json:"file"`
	// Seq is the highest rotated sequence number when the head was
	// written: when File is rotated, it becomes File.<Seq+1>.
	Seq int `json:"seq"`
	// Records is how many records (lines) File held, Size its size.
	Records int64 `json:"records"`
	Size    int64 `json:"size"`
	// LastHash is the hash of the last of them; with no records, the hash
	// the file's first record will name as its prev_hash.
	LastHash string `json:"last_hash"`
	// KeyID is the key id of a keyed chain (audit.hmac_key_file).
	KeyID string `json:"key_id,omitempty"`
	// Time is when the head was taken.
	Time time.Time `json:"time"`
}

// ReadHead reads a head file; a missing one is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func ReadHead(path string) (Head, error) {
	var h Head
	data, err := os.ReadFile(path)
	if err != nil {
		return h, err
	}
	if err := json.Unmarshal(data, &h); err != nil || h.File == "" || h.Records < 0 || h.Size < 0 || len(h.LastHash) != 64 {
		return Head{}, fmt.Errorf("%s is not an audit head file (want JSON with file, records, size and last_hash)", path)
	}
	return h, nil
}

// writeHead replaces the head file at path with h: written to a temporary
// file in the same directory, synced, and renamed over it, so that a
// reader or a crash sees the old head or the new one, never a mix.
func writeHead(path string, h Head) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	data = append(data, '\n')
	// Hidden, so that a glob of rotated files (audit.log.*) never
	// catches it half written.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(fileMode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("audit: writing the head file: %w", err)
	}
	return nil
}

// HeadMismatchError says that audit files disagree with their head: the
// file the head names holds fewer records than it did (cut short), or
// another record where the head's last one was (rewritten).
type HeadMismatchError struct {
	// File is the audit file the head names.
	File string
	// Head is the head; Records how many records File holds now.
	Head    Head
	Records int64
	// Rewritten is set when File holds enough records, but record
	// Head.Records is not the one the head names.
	Rewritten bool
}

// Error implements error.
func (e *HeadMismatchError) Error() string {
	if e.Rewritten {
		return fmt.Sprintf("%s: record %d is not the one its head (of %s) names: the file was rewritten",
			e.File, e.Head.Records, e.Head.Time.Format(time.RFC3339))
	}
	return fmt.Sprintf("%s was cut short: %d records at the head (of %s), %d in the file",
		e.File, e.Head.Records, e.Head.Time.Format(time.RFC3339), e.Records)
}

// headTarget returns which of files the head h describes: the one named
// h.File, or, when that was rotated after h was written (h.Seq+1, rotated
// before the head could follow), that rotated file; -1 when none of them.
func headTarget(h Head, files []string) int {
	rotated := filepath.Base(rotatedName(h.File, h.Seq+1))
	at := -1
	for i, f := range files {
		switch filepath.Base(f) {
		case rotated:
			return i
		case h.File:
			at = i
		}
	}
	return at
}

// isNotExist reports whether err says a file does not exist.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// heads is the head file's side of a Writer: the last head stored and
// whether it was handed to OnHead.
type heads struct {
	mu      sync.Mutex
	gen     uint64 // of last; 0: none stored yet
	last    Head
	logged  uint64 // gen of the last head handed to onHead
	now     func() time.Time
	onHead  func(Head)
	ticks   <-chan time.Time
	stopTck func()
}

// takeHeadLocked returns the head of what was written to the file so far
// and its generation; w.mu is held, and the buffer was flushed.
func (w *Writer) takeHeadLocked() (Head, uint64, bool) {
	h, ok := w.out.head(string(w.prev[:]), w.hash.id, w.heads.now())
	if !ok {
		return Head{}, 0, false
	}
	w.headGen++
	return h, w.headGen, true
}

// storeHead writes h, taken as generation gen, to the head file, unless a
// newer head is there already. Errors go to OnError.
func (w *Writer) storeHead(h Head, gen uint64) {
	w.heads.mu.Lock()
	defer w.heads.mu.Unlock()
	if gen <= w.heads.gen {
		return
	}
	if err := w.out.storeHead(h); err != nil {
		if w.onError != nil {
			w.onError(err)
		}
		return
	}
	w.heads.gen, w.heads.last = gen, h
}

// logHead hands the stored head to OnHead, unless it was handed out
// already.
func (w *Writer) logHead() {
	w.heads.mu.Lock()
	h, fresh := w.heads.last, w.heads.gen > w.heads.logged
	w.heads.logged = w.heads.gen
	w.heads.mu.Unlock()
	if fresh && w.heads.onHead != nil {
		w.heads.onHead(h)
	}
}

// Head returns the head last stored in the head file, and false when none
// was yet (or the sink has none).
func (w *Writer) Head() (Head, bool) {
	w.heads.mu.Lock()
	defer w.heads.mu.Unlock()
	return w.heads.last, w.heads.gen > 0
}
