//go:build unix && !linux

package lean

import "syscall"

// sysWrite and sysRead are syscall.Write and Read elsewhere than on Linux
// (rawio_linux.go makes them raw system calls).
func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return errnoOf(n, err)
}

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return errnoOf(n, err)
}

func errnoOf(n int, err error) (int, syscall.Errno) {
	if err == nil {
		return n, 0
	}
	if e, ok := err.(syscall.Errno); ok {
		return 0, e
	}
	return 0, syscall.EIO
}
