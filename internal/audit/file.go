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
	path string
	max  int64
	keep int
	f    *os.File
	size int64
	seq  int // highest rotated sequence number in use
}

// openRotating opens (or creates) path for appending and returns the hash
// the next record must chain to (see nextPrev): that of the file's last
// record, else of its newest rotated file's, else GenesisHash. A last line
// cut short by a crash is ended with a newline, so the next record starts
// on a line of its own (Verify reports the torn line).
func openRotating(path string, max int64, keep int) (*rotating, string, error) {
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
