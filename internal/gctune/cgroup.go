package gctune

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// unlimited is where a cgroup's memory limit stops being one: cgroup v1
// says "no limit" with 2^63 rounded down to a page, and no machine has
// 4 EiB.
const unlimited = 1 << 62

// Cgroup is the memory limit of a process's cgroup, as CgroupMemoryLimit
// found it.
type Cgroup struct {
	// Limit is the smallest memory limit of the cgroup and its parents, in
	// bytes; 0 when there is none.
	Limit int64
	// File is the file Limit was read from, relative to the root given to
	// CgroupMemoryLimit (such as "sys/fs/cgroup/memory.max"); empty when
	// there is no limit.
	File string
}

// CgroupMemoryLimit returns the memory limit of the calling process's
// cgroup, reading root as the root of the file system (os.DirFS("/") in
// production, a testdata tree in tests): proc/self/cgroup names the
// cgroup; with a v1 memory controller, its memory.limit_in_bytes under
// sys/fs/cgroup/memory, else (v2) its memory.max under sys/fs/cgroup. The
// cgroup's directory and each parent up to the mount's root are read, and
// the smallest limit wins: a limit binds the cgroups below it, and in a
// container the cgroup's own directory is the mount's root, not the path
// proc/self/cgroup names. "max", values of 2^62 or more, missing and
// unreadable files mean no limit.
func CgroupMemoryLimit(root fs.FS) Cgroup {
	data, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return Cgroup{}
	}
	v1, v2, ok1, ok2 := cgroupPaths(data)
	var mount, file, dir string
	switch {
	case ok1:
		mount, file, dir = "sys/fs/cgroup/memory", "memory.limit_in_bytes", v1
	case ok2:
		mount, file, dir = "sys/fs/cgroup", "memory.max", v2
	default:
		return Cgroup{}
	}
	var found Cgroup
	for dir = path.Clean("/" + dir); ; dir = path.Dir(dir) {
		name := path.Join(mount, dir, file)
		if n, ok := readLimit(root, name); ok && (found.Limit == 0 || n < found.Limit) {
			found = Cgroup{Limit: n, File: name}
		}
		if dir == "/" {
			return found
		}
	}
}

// cgroupPaths reads /proc/self/cgroup's lines "ID:controllers:path": the
// path of the v1 hierarchy with the memory controller, and of the v2
// hierarchy (ID 0, no controllers).
func cgroupPaths(data []byte) (v1, v2 string, ok1, ok2 bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			v2, ok2 = p, true
		case slices.Contains(strings.Split(controllers, ","), "memory"):
			v1, ok1 = p, true
		}
	}
	return v1, v2, ok1, ok2
}

// readLimit reads one memory limit file: a number of bytes, or "max".
func readLimit(root fs.FS, name string) (int64, bool) {
	b, err := fs.ReadFile(root, name)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= unlimited {
		return 0, false // "max", garbage, or no limit
	}
	return n, true
}
