package main

// A full disk under bolt, by the gateway's RLIMIT_FSIZE (a write past the
// limit fails with EFBIG; Go ignores SIGXFSZ), in two degrees:
//
//   - growth: the limit is the bolt file's size, so that no file the
//     gateway writes can grow, as on a full file system, where what is
//     rewritten in place still succeeds and what needs a new block does
//     not (bolt reuses its free pages: a commit fails only when it must
//     grow the file);
//   - writes: the limit is 0, so that every write fails, as on a file
//     system remounted read-only after an error.
//
// Its log, written to a file too, fails alike.

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
	pid, limit := g.pid(), uint64(st.Size())
	if f.Detail == diskWrites {
		limit = 0
	}
	if err := setFileSizeLimit(pid, limit); err != nil {
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
		f.Did = fmt.Sprintf("%s pid %d: no write past %d bytes (the bolt file's size: %d)", g.name, pid, limit, st.Size())
	}
	return err
}

// The degrees of a disk-full (its Detail).
const (
	diskGrowth = "growth" // no file can grow
	diskWrites = "writes" // no write at all
)

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
