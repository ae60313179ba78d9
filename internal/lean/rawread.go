package lean

import (
	"io"
	"net"
	"os"
	"syscall"
)

// sockReader reads a plain TCP connection through its RawConn with
// sysRead (rawio_linux.go: a read(2) without the runtime's system call
// bookkeeping), as the connection's own Read would: the same waits and
// deadlines (the poller's, through RawConn.Read), io.EOF at the end, and
// errors of the same shape (*net.OpError with Op "read").
type sockReader struct {
	nc    net.Conn
	raw   syscall.RawConn
	step  func(fd uintptr) bool // readStep, built once
	p     []byte
	n     int
	errno syscall.Errno
}

// init sets r up to read nc, when nc is a socket of the net package's
// own (a wrapper's Read may do more than read), and leaves r unset (raw
// nil) otherwise.
func (r *sockReader) init(nc net.Conn, raw syscall.RawConn) {
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
		r.nc, r.raw = nc, raw
		r.step = r.readStep
	}
}

// Read reads into p.
func (r *sockReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p, r.n, r.errno = p, 0, 0
	err := r.raw.Read(r.step)
	r.p = nil
	if err != nil { // a deadline, or the connection closed
		if oe, ok := err.(*net.OpError); ok && oe.Op == "raw-read" {
			oe.Op = "read"
		}
		return 0, err
	}
	if r.errno != 0 {
		return 0, &net.OpError{Op: "read", Net: r.nc.LocalAddr().Network(), Source: r.nc.LocalAddr(),
			Addr: r.nc.RemoteAddr(), Err: os.NewSyscallError("read", r.errno)}
	}
	if r.n == 0 {
		return 0, io.EOF
	}
	return r.n, nil
}

// readStep is Read's RawConn.Read callback: false asks to wait for the
// connection to become readable.
func (r *sockReader) readStep(fd uintptr) bool {
	n, e := sysRead(fd, r.p)
	if e == syscall.EAGAIN {
		return false
	}
	r.n, r.errno = n, e
	return true
}
