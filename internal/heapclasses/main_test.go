package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// keep holds what the test allocates, so the dump has it live.
var keep [][]byte

// A dump of this very process holds the objects it allocated: 20,000
// live objects of 112 bytes, every other one of a burst of 40,000, are
// found in the 112-byte class with their bytes, on pages that hold about
// twice as much (the burst's other half was garbage).
func TestADumpOfThisProcessHoldsWhatItAllocated(t *testing.T) {
	const n = 40_000
	burst := make([][]byte, n)
	for i := range burst {
		burst[i] = make([]byte, 112)
	}
	for i := 0; i < n; i += 2 {
		keep = append(keep, burst[i])
	}
	burst = nil
	runtime.GC()
	path := filepath.Join(t.TempDir(), "heap.dump")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	debug.WriteHeapDump(f.Fd())
	f.Close()
	runtime.KeepAlive(keep)

	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	classes, err := read(in)
	if err != nil {
		t.Fatal(err)
	}
	var c class
	for _, x := range classes {
		if x.size == 112 {
			c = x
		}
	}
	if c.objects < n/2 || c.live < n/2*112 {
		t.Fatalf("the 112-byte class holds %d objects, %d bytes: want at least %d", c.objects, c.live, n/2)
	}
	if held := c.pages << pageShift; held < c.live || held < uint64(n)*112*9/10 {
		t.Fatalf("%d bytes of pages hold %d live bytes: the burst's pages should be about twice that", held, c.live)
	}
	var out bytes.Buffer
	report(&out, classes, 5)
	if !strings.Contains(out.String(), "part-full") || !strings.Contains(out.String(), "     112 ") {
		t.Fatalf("the report does not show the 112-byte class:\n%s", out.String())
	}
}

func TestNotADump(t *testing.T) {
	if _, err := read(strings.NewReader("hello")); err == nil {
		t.Fatal("a file that is not a heap dump was read")
	}
}
