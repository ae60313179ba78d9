package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// fileMode is the mode of new audit files: they name who did what.
const fileMode = 0o640

// tailChunk is how much of a file's end is read at a time to find its
// last line.
const tailChunk = 64 << 10

// rotating is the file sink: path is the current file; before it would
// grow past max bytes it is renamed to path.NNNNNN (the next sequence
// number, so that names sort oldest first) and a new one started; rotated
// files beyond keep are deleted, oldest first.
type rotating struct {
	path  string
	max   int64
	keep  int
	f     *os.File
	size  int64
	lines int64 // records (newlines) in the current file
	seq   int   // highest rotated sequence number in use
}

// openRotating opens (or creates) path for appending and returns the hash
// the next record must chain to (see nextPrev): that of the file's last
// record, else of its newest rotated file's, else GenesisHash. A last line
// cut short by a crash is ended with a newline, so the next record starts
// on a line of its own (Verify reports the torn line).
//
// It then counts the file's records and compares them with the head file
// (head.go), which was written after the records it names were synced:
// a file that holds fewer, or another record where the head's last one
// was, was cut short or rewritten. That is returned as a
// *HeadMismatchError in headErr, beside a usable sink: the caller decides
// whether to write on (and replace the head) or not.
func openRotating(path string, max int64, keep int) (r *rotating, prev string, headErr, err error) {
	r, prev, err = openSink(path, max, keep)
	if err != nil {
		return nil, "", nil, err
	}
	if headErr, err = r.checkHead(); err != nil {
		r.f.Close()
		return nil, "", nil, err
	}
	return r, prev, headErr, nil
}

// openSink opens the current file and finds the hash to chain to (see
// openRotating).
func openSink(path string, max int64, keep int) (*rotating, string, error) {
	r := &rotating{path: path, max: max, keep: keep}
	seqs, err := rotatedSeqs(path)
	if err != nil {
		return nil, "", err
	}
	if len(seqs) > 0 {
		r.seq = seqs[len(seqs)-1]
	}
	if err := r.open(); err != nil {
		return nil, "", err
	}
	last, torn, err := lastLine(r.f)
	if err == nil && last == nil && r.seq > 0 {
		var g *os.File
		if g, err = os.Open(rotatedName(path, r.seq)); err == nil {
			last, _, err = lastLine(g)
			g.Close()
		}
	}
	if err != nil {
		r.f.Close()
		return nil, "", fmt.Errorf("audit: reading the last record of %s: %w", path, err)
	}
	if torn {
		if _, err := r.Write([]byte("\n")); err != nil {
			r.f.Close()
			return nil, "", fmt.Errorf("audit: %w", err)
		}
	}
	return r, nextPrev(last), nil
}

// nextPrev is the prev_hash of the record after last, the last line of a
// file (nil: none): its hash member, or, when it has none (a torn or
// edited line, which Verify reports), the SHA-256 of the line.
func nextPrev(last []byte) string {
	if last == nil {
		return GenesisHash
	}
	if h := hashOf(last); h != "" {
		return h
	}
	sum := sha256.Sum256(last)
	return hex.EncodeToString(sum[:])
}

// open opens the current file for appending.
func (r *rotating) open() error {
	f, err := os.OpenFile(r.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, fileMode)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit: %w", err)
	}
	r.f, r.size = f, st.Size()
	return nil
}

func (r *rotating) Write(p []byte) (int, error) {
	n, err := r.f.Write(p)
	r.size += int64(n)
	r.lines += int64(bytes.Count(p[:n], []byte{'\n'}))
	return n, err
}

// head returns the head of what was written so far (to be synced before
// it is stored).
func (r *rotating) head(last string, keyID string, now time.Time) (Head, bool) {
	return Head{File: filepath.Base(r.path), Seq: r.seq, Records: r.lines, Size: r.size, LastHash: last, KeyID: keyID, Time: now.UTC()}, true
}

// storeHead replaces the head file.
func (r *rotating) storeHead(h Head) error { return writeHead(HeadPath(r.path), h) }

// checkHead counts the current file's records and compares the file the
// head file names with it (see openRotating); err is for files that
// cannot be read.
func (r *rotating) checkHead() (mismatch error, err error) {
	h, herr := ReadHead(HeadPath(r.path))
	want := int64(0)
	target := r.path
	switch {
	case herr != nil && isNotExist(herr):
	case herr != nil:
		return herr, r.countLines(0, nil)
	case h.File != filepath.Base(r.path):
		return fmt.Errorf("audit: the head file %s names %s, not %s", HeadPath(r.path), h.File, filepath.Base(r.path)), r.countLines(0, nil)
	case h.Seq < r.seq: // rotated after the head was written, before it could follow
		target = rotatedName(r.path, h.Seq+1)
		want = h.Records
	default:
		want = h.Records
	}
	var at []byte
	if target == r.path {
		if err := r.countLines(want, &at); err != nil {
			return nil, err
		}
		return h.compare(r.path, r.lines, at), nil
	}
	if err := r.countLines(0, nil); err != nil {
		return nil, err
	}
	f, err := os.Open(target)
	if isNotExist(err) {
		return nil, nil // rotated away since
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := scanLines(f, want, &at)
	if err != nil {
		return nil, err
	}
	return h.compare(target, n, at), nil
}

// countLines sets r.lines to the current file's lines, and *at to line
// number want (1-based) when at is not nil.
func (r *rotating) countLines(want int64, at *[]byte) error {
	n, err := scanLines(io.NewSectionReader(r.f, 0, r.size), want, at)
	r.lines = n
	return err
}

// compare returns a *HeadMismatchError when file, holding n records of
// which at is number h.Records, is not what h names; nil when it is.
func (h Head) compare(file string, n int64, at []byte) error {
	switch {
	case n < h.Records:
		return &HeadMismatchError{File: file, Head: h, Records: n}
	case h.Records > 0 && hashOf(at) != h.LastHash:
		return &HeadMismatchError{File: file, Head: h, Records: n, Rewritten: true}
	}
	return nil
}

// scanLines counts the lines of r (newlines, and a last line without one)
// and sets *at to a copy of line number want (1-based), when at is not nil
// and there is such a line.
func scanLines(r io.Reader, want int64, at *[]byte) (int64, error) {
	var n int64
	found := false
	err := eachLine(r, func(i int, line []byte) error {
		n = int64(i)
		if at != nil && n == want {
			*at, found = bytes.Clone(line), true
		}
		return nil
	})
	if at != nil && !found {
		*at = nil
	}
	return n, err
}

func (r *rotating) sync() error { return r.f.Sync() }

// syncer returns the current file's Sync, to call without the writer's
// lock; once rotation closed that file (after syncing it) it fails with
// os.ErrClosed.
func (r *rotating) syncer() func() error { return r.f.Sync }

func (r *rotating) needsRotation(buffered, n int) bool {
	used := r.size + int64(buffered)
	return used > 0 && used+int64(n) > r.max
}

func (r *rotating) close() error { return r.f.Close() }

// rotate renames the current file to the next sequence number, opens a new
// one and deletes rotated files beyond keep.
func (r *rotating) rotate() error {
	if err := r.f.Close(); err != nil {
		return err
	}
	next := rotatedName(r.path, r.seq+1)
	if err := os.Rename(r.path, next); err != nil {
		if oerr := r.open(); oerr != nil { // keep writing where we were
			return errors.Join(err, oerr)
		}
		return err
	}
	r.seq++
	r.lines = 0
	if err := r.open(); err != nil {
		return err
	}
	seqs, err := rotatedSeqs(r.path)
	if err != nil {
		return err
	}
	var errs []error
	for len(seqs) > r.keep {
		if err := os.Remove(rotatedName(r.path, seqs[0])); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		seqs = seqs[1:]
	}
	return errors.Join(errs...)
}

// rotatedName is the name of rotated file number seq.
func rotatedName(path string, seq int) string { return fmt.Sprintf("%s.%06d", path, seq) }

// rotatedSeqs returns the sequence numbers of path's rotated files, in
// increasing order.
func rotatedSeqs(path string) ([]int, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var seqs []int
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok || e.IsDir() || len(rest) < 6 {
			continue
		}
		if n, err := strconv.Atoi(rest); err == nil && n > 0 {
			seqs = append(seqs, n)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

// lastLine returns the last line of f (without its newline), nil for an
// empty file, and whether that line lacks its newline (a torn write). It
// reads from the end, a chunk at a time.
func lastLine(f *os.File) (line []byte, torn bool, err error) {
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	var tail []byte
	for pos := st.Size(); pos > 0; {
		n := min(int64(tailChunk), pos)
		pos -= n
		chunk := make([]byte, int(n)+len(tail))
		if _, err := f.ReadAt(chunk[:n], pos); err != nil && !errors.Is(err, io.EOF) {
			return nil, false, err
		}
		copy(chunk[n:], tail)
		tail = chunk
		torn = tail[len(tail)-1] != '\n'
		body := tail
		if !torn {
			body = body[:len(body)-1]
		}
		if i := bytes.LastIndexByte(body, '\n'); i >= 0 {
			return body[i+1:], torn, nil
		}
		if pos == 0 {
			return body, torn, nil
		}
	}
	return nil, false, nil
}
