package server

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"go.uber.org/zap"
)

// memoryLimitShare is the part of the container's memory limit the Go
// heap is held under: the rest is for the binary's pages, stacks and the
// runtime's own.
const memoryLimitShare = 0.9

// noCgroupLimit is where cgroup v1 says "no limit" (a page-rounded
// maximum int64); anything above it is none.
const noCgroupLimit = 1 << 60

// SetMemoryLimit holds a server process's Go heap under the memory limit
// of the container it runs in: unless GOMEMLIMIT is set (which wins, "off"
// included), the runtime's soft limit becomes 90% of the cgroup's memory
// limit. Without it the collector lets the heap grow to twice what is
// live, and a start that reads a large store (1,000,000 finished jobs)
// peaks at three times the memory the server then needs: a container
// sized for the server would be killed at every restart. It returns the
// limit set (0: none) and logs what it did.
func SetMemoryLimit(log *zap.Logger) int64 {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		log.Info("Go memory limit from GOMEMLIMIT", zap.String("GOMEMLIMIT", v))
		return 0
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0
	}
	limit, file := cgroupMemoryLimit(self, "/sys/fs/cgroup")
	if limit <= 0 {
		return 0
	}
	soft := int64(float64(limit) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	log.Info("Go memory limit set from the container's", zap.Int64("container_bytes", limit), zap.String("from", file), zap.Int64("go_limit_bytes", soft))
	return soft
}

// cgroupMemoryLimit is the tightest memory limit on the cgroups a process
// is in, given its /proc/self/cgroup and where the cgroup file systems are
// mounted (root): cgroup v2's memory.max of its group and every group
// above, or v1's memory.limit_in_bytes; 0 when there is none. In a
// container the process's group is usually the root of what it sees, so
// the root's own files count too. file is the file the limit came from.
func cgroupMemoryLimit(self []byte, root string) (limit int64, file string) {
	consider := func(f string) {
		b, err := os.ReadFile(f)
		if err != nil {
			return
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v <= 0 || v >= noCgroupLimit { // "max": none
			return
		}
		if limit == 0 || v < limit {
			limit, file = v, f
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(self))
	for sc.Scan() {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		// The group's limit and every parent's bind it.
		walk := func(dir, name string) {
			for p := filepath.Clean("/" + parts[2]); ; p = filepath.Dir(p) {
				consider(filepath.Join(dir, p, name))
				if p == "/" {
					return
				}
			}
		}
		switch {
		case parts[0] == "0" && parts[1] == "": // cgroup v2
			walk(root, "memory.max")
		case hasController(parts[1], "memory"): // v1
			walk(filepath.Join(root, "memory"), "memory.limit_in_bytes")
		}
	}
	return limit, file
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}
