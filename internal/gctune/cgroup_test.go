package gctune

import (
	"os"
	"testing"
)

// TestCgroupMemoryLimit reads the file trees under testdata as the root of
// the file system.
func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		tree string
		want Cgroup
	}{
		{"v2", Cgroup{Limit: 512 << 20, File: "sys/fs/cgroup/memory.max"}},
		{"v2-max", Cgroup{}},
		// The pod's limit binds the container below it, whose own is "max".
		{"v2-nested", Cgroup{Limit: 1 << 30, File: "sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/memory.max"}},
		{"v2-garbage", Cgroup{}},
		{"v2-no-file", Cgroup{}},
		// Without a cgroup namespace the path names the host's cgroup;
		// the container's is the mount's root.
		{"v1", Cgroup{Limit: 256 << 20, File: "sys/fs/cgroup/memory/memory.limit_in_bytes"}},
		{"v1-unlimited", Cgroup{}},
		// The memory controller is on the v1 hierarchy: its limit counts.
		{"hybrid", Cgroup{Limit: 128 << 20, File: "sys/fs/cgroup/memory/user.slice/memory.limit_in_bytes"}},
		{"none", Cgroup{}},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			if got := CgroupMemoryLimit(os.DirFS("testdata/" + tc.tree)); got != tc.want {
				t.Errorf("CgroupMemoryLimit = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCgroupPaths(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		v1, v2     string
		ok1, ok2   bool
	}{
		{"v2", "0::/a/b\n", "", "/a/b", false, true},
		{"v1 among controllers", "4:cpu,memory:/x\n3:pids:/y\n", "/x", "", true, false},
		{"named hierarchy is not memory", "1:name=memory:/z\n", "", "", false, false},
		{"both", "0::/v2\n7:memory:/v1\n", "/v1", "/v2", true, true},
		{"garbage", "nothing here\n\n", "", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v1, v2, ok1, ok2 := cgroupPaths([]byte(tc.data))
			if v1 != tc.v1 || v2 != tc.v2 || ok1 != tc.ok1 || ok2 != tc.ok2 {
				t.Errorf("cgroupPaths = %q, %q, %v, %v; want %q, %q, %v, %v", v1, v2, ok1, ok2, tc.v1, tc.v2, tc.ok1, tc.ok2)
			}
		})
	}
}
