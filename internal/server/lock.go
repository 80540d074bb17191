package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lockName is the file in a data directory its one server holds locked.
const lockName = "LOCK"

// dataDirLock is a data directory held by this process: one writer per
// JetStream store. Two embedded servers on one store corrupt it (each
// takes the other's files for its own).
type dataDirLock struct{ f *os.File }

// lockDataDir takes the data directory for this process, or says which
// process holds it. The lock is an advisory flock on <dir>/LOCK, released
// by the kernel when the process dies, kill -9 included; the file names the
// holder for the message.
func lockDataDir(dir string) (*dataDirLock, error) {
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(holder))
			if who == "" {
				who = "another process"
			}
			return nil, fmt.Errorf("data directory %s is in use by %s: stop that server, or give this one another --data-dir (or the same NATS cluster with --nats-url)", dir, who)
		}
		return nil, fmt.Errorf("locking data directory %s: %w", dir, err)
	}
	host, _ := os.Hostname()
	stamp := "spotwise server pid " + strconv.Itoa(os.Getpid()) + " on " + host + " since " + time.Now().UTC().Format(time.RFC3339)
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(stamp+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// release lets the directory go.
func (l *dataDirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
