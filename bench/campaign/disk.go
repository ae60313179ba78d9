package main

// A full disk under bolt: the gateway's RLIMIT_FSIZE set to the bolt
// file's size, so that no file it writes can grow (a write past the limit
// fails with EFBIG; Go ignores SIGXFSZ), as on a full file system, where
// what is rewritten in place still succeeds and what needs a new block
// does not. Its log, written to a file too, fails alike.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"
)

// fillDisk fills the disk of the bolt gateway for f.For. It holds the
// gateway's process (a restart would lift the limit).
func (n *nemesis) fillDisk(f *fault) error {
	g := n.c.gateways[0]
	g.faultMu.Lock()
	defer g.faultMu.Unlock()
	st, err := os.Stat(filepath.Join(n.c.dir, "state.db"))
	if err != nil {
		return err
	}
	pid := g.pid()
	if err := setFileSizeLimit(pid, uint64(st.Size())); err != nil {
		return fmt.Errorf("prlimit %d: %w", pid, err)
	}
	f.Start = time.Now()
	time.Sleep(f.For)
	err = setFileSizeLimit(pid, unlimited)
	f.End = time.Now()
	if g.pid() != pid || !g.running() {
		// The promise is 503s, not a crash: say so, and start it again.
		err = errors.Join(err, fmt.Errorf("%s (pid %d) exited while its disk was full: see %s", g.name, pid, g.log.Name()))
		if serr := g.start(); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	if err == nil {
		f.Did = fmt.Sprintf("%s pid %d: no file larger than %d bytes", g.name, pid, st.Size())
	}
	return err
}

// unlimited is RLIM_INFINITY.
const unlimited = ^uint64(0)

// setFileSizeLimit sets the soft RLIMIT_FSIZE of process pid to limit
// bytes (its hard limit unlimited, as the campaign's, so that it can be
// raised again without privileges).
func setFileSizeLimit(pid int, limit uint64) error {
	r := syscall.Rlimit{Cur: limit, Max: unlimited}
	_, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(syscall.RLIMIT_FSIZE),
		uintptr(unsafe.Pointer(&r)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
