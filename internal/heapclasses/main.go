// Command heapclasses reads a heap dump (runtime/debug.WriteHeapDump, as
// the memory benchmarks write with SPOTWISE_HEAP_DUMP) and says, size
// class by size class, how many bytes of live objects there are and how
// much of the heap's pages holds them: the gap is pages left part-full
// (a burst's survivors scattered among its garbage), which the heap in
// use counts and the live heap does not.
//
//	go run ./internal/heapclasses heap.dump
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// The records of a dump this reads (runtime/heapdump.go): its parameters
// and itabs, with the types they name, come before the objects; the
// objects of one span come one after another.
const (
	tagObject = 1
	tagType   = 3
	tagParams = 6
	tagItab   = 8

	pageShift = 13 // the runtime's 8 KB pages
)

// class is what the dump holds of one object size.
type class struct {
	size, objects, live, pages uint64
}

func (c class) waste() uint64 { return c.pages<<pageShift - c.live }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: heapclasses HEAP_DUMP")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	classes, err := read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	report(os.Stdout, classes, 25)
}

// read adds up the objects of a dump by size.
func read(r io.Reader) ([]class, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	hdr := make([]byte, len("go1.7 heap dump\n"))
	if _, err := io.ReadFull(br, hdr); err != nil || string(hdr) != "go1.7 heap dump\n" {
		return nil, errors.New("not a Go heap dump")
	}
	var err error
	num := func() uint64 {
		if err != nil {
			return 0
		}
		var v uint64
		v, err = binary.ReadUvarint(br)
		return v
	}
	skip := func() { // a length-prefixed string
		if n := num(); err == nil {
			_, err = br.Discard(int(n))
		}
	}
	type acc struct {
		class
		pages map[uint64]bool
	}
	by := map[uint64]*acc{}
	for err == nil {
		switch tag := num(); tag {
		case tagParams: // byte order, pointer size, arena start and end
			for range 4 {
				num()
			}
			skip() // GOARCH
			skip() // the Go version
			num()  // the CPUs
		case tagType:
			num()
			num()
			skip()
			num()
		case tagItab:
			num()
			num()
		case tagObject:
			addr, size := num(), num()
			if err == nil {
				_, err = br.Discard(int(size))
			}
			for num() != 0 { // the pointer fields: kind, offset
				num()
			}
			if err != nil || size == 0 {
				break
			}
			a := by[size]
			if a == nil {
				a = &acc{class: class{size: size}, pages: map[uint64]bool{}}
				by[size] = a
			}
			a.objects++
			a.live += size
			for p := addr >> pageShift; p <= (addr+size-1)>>pageShift; p++ {
				a.pages[p] = true
			}
		default:
			// Past the objects (goroutines, roots, statistics follow).
			out := make([]class, 0, len(by))
			for _, a := range by {
				a.class.pages = uint64(len(a.pages))
				out = append(out, a.class)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("reading the dump: %w", err)
}

// report prints the totals and the top classes by bytes of part-full
// pages.
func report(w io.Writer, classes []class, top int) {
	var live, held uint64
	for _, c := range classes {
		live += c.live
		held += c.pages << pageShift
	}
	mb := func(v uint64) float64 { return float64(v) / (1 << 20) }
	fmt.Fprintf(w, "live objects %.1f MB in %.1f MB of pages (%.1f MB part-full)\n", mb(live), mb(held), mb(held-live))
	sort.Slice(classes, func(i, j int) bool { return classes[i].waste() > classes[j].waste() })
	fmt.Fprintf(w, "%8s %10s %10s %10s %10s\n", "size", "objects", "live MB", "pages MB", "gap MB")
	for i, c := range classes {
		if i == top {
			break
		}
		fmt.Fprintf(w, "%8d %10d %10.1f %10.1f %10.1f\n", c.size, c.objects, mb(c.live), mb(c.pages<<pageShift), mb(c.waste()))
	}
}
