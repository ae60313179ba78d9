//go:build unix && !linux

package lean

import "syscall"

// sysWrite and sysRead are syscall.Write and Read elsewhere than on Linux
// (rawio_linux.go makes them raw system calls), made again on EINTR.
func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) { return retried(syscall.Write, fd, p) }

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) { return retried(syscall.Read, fd, p) }

func retried(call func(int, []byte) (int, error), fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		n, err := call(int(fd), p)
		if err == nil {
			return n, 0
		}
		e, ok := err.(syscall.Errno)
		if !ok {
			return 0, syscall.EIO
		}
		if e != syscall.EINTR {
			return 0, e
		}
	}
}
