//go:build unix

package lean

import "syscall"

// idleAlive peeks at an idle connection without blocking: a connection the
// broker closed, reset or wrote to while it was idle cannot carry a call.
// (http.Transport learns this from its reading goroutine.)
func (c *conn) idleAlive() bool {
	if c.raw == nil {
		return true
	}
	var buf [1]byte
	alive := false
	err := c.raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = err == syscall.EAGAIN
		return true
	})
	return err == nil && alive
}
