package server

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"go.uber.org/zap"
)

// The memory limit a server holds its heap under is the tightest its
// cgroups set, wherever the container runtime mounts them; "max" and
// cgroup v1's huge "no limit" are none.
func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		self  string
		files map[string]string
		want  int64
		from  string
	}{
		{name: "v2 container, its group at the root",
			self: "0::/\n", files: map[string]string{"memory.max": "1073741824\n"}, want: 1 << 30, from: "memory.max"},
		{name: "v2 host group with a parent's limit",
			self:  "0::/system.slice/spotwise.service\n",
			files: map[string]string{"system.slice/spotwise.service/memory.max": "max\n", "system.slice/memory.max": "2147483648\n"},
			want:  2 << 30, from: "system.slice/memory.max"},
		{name: "v2 the tighter of group and parent",
			self:  "0::/a/b\n",
			files: map[string]string{"a/b/memory.max": "536870912\n", "a/memory.max": "2147483648\n"},
			want:  512 << 20, from: "a/b/memory.max"},
		{name: "v2 no limit anywhere",
			self: "0::/user.slice/session-1.scope\n", files: map[string]string{"user.slice/memory.max": "max\n"}},
		{name: "v2 path of the host, container's group mounted at the root",
			self: "0::/docker/0123abcd\n", files: map[string]string{"memory.max": "805306368\n"}, want: 768 << 20, from: "memory.max"},
		{name: "v1 memory controller",
			self:  "12:pids:/docker/x\n11:cpu,cpuacct:/docker/x\n4:memory:/docker/x\n",
			files: map[string]string{"memory/docker/x/memory.limit_in_bytes": "1610612736\n"},
			want:  1536 << 20, from: "memory/docker/x/memory.limit_in_bytes"},
		{name: "v1 a parent's limit",
			self:  "4:memory:/kubepods/pod1/c1\n",
			files: map[string]string{"memory/kubepods/pod1/c1/memory.limit_in_bytes": "9223372036854771712\n", "memory/kubepods/pod1/memory.limit_in_bytes": "268435456\n"},
			want:  256 << 20, from: "memory/kubepods/pod1/memory.limit_in_bytes"},
		{name: "v1 unlimited",
			self: "4:memory:/\n", files: map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}},
		{name: "garbled files and lines",
			self: "nonsense\n0::/g\n", files: map[string]string{"g/memory.max": "lots\n", "memory.max": "-5\n"}},
		{name: "no cgroup files", self: "0::/\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range tc.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, file := cgroupMemoryLimit([]byte(tc.self), root)
			if got != tc.want {
				t.Fatalf("limit %d, want %d", got, tc.want)
			}
			if tc.from != "" && file != filepath.Join(root, tc.from) {
				t.Fatalf("limit read from %s, want %s", file, tc.from)
			}
		})
	}
}

// GOMEMLIMIT, when set, is the operator's word: the server leaves the
// runtime's limit as it is.
func TestSetMemoryLimitLeavesGOMEMLIMIT(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "off")
	before := debug.SetMemoryLimit(-1)
	if got := SetMemoryLimit(zap.NewNop()); got != 0 || debug.SetMemoryLimit(-1) != before {
		t.Fatalf("SetMemoryLimit set %d with GOMEMLIMIT given", got)
	}
}

// /proc/self/cgroup as read from a hostile or broken system never panics.
func FuzzCgroupMemoryLimit(f *testing.F) {
	f.Add([]byte("0::/\n4:memory:/docker/x\n"))
	f.Add([]byte("::::\n0::../../..\n"))
	root := f.TempDir()
	if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte("1048576\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, self []byte) {
		if v, _ := cgroupMemoryLimit(self, root); v != 0 && v != 1<<20 {
			t.Fatalf("limit %d from files that hold 1 MiB or nothing", v)
		}
	})
}
