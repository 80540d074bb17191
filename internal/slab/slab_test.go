package slab

import (
	"testing"
	"unsafe"
)

type item struct {
	id   string
	n    int
	next *item
}

func TestValuesAreZeroedDistinctAndReused(t *testing.T) {
	var p Pool[item]
	seen := map[*item]bool{}
	var all []*item
	for i := range 5000 { // several chunks
		v := p.New()
		if *v != (item{}) {
			t.Fatalf("value %d is not zeroed: %+v", i, *v)
		}
		if seen[v] {
			t.Fatalf("value %d handed out twice", i)
		}
		seen[v] = true
		v.id, v.n = "x", i
		all = append(all, v)
	}
	for i, v := range all {
		if v.n != i {
			t.Fatalf("value %d was overwritten: holds %d", i, v.n)
		}
	}
	if p.Live() != 5000 {
		t.Fatalf("live %d, want 5000", p.Live())
	}
	freed := all[1234]
	freed.next = all[0]
	p.Free(freed)
	if p.Live() != 4999 {
		t.Fatalf("live %d after a free, want 4999", p.Live())
	}
	again := p.New()
	if again != freed {
		t.Fatal("a freed value was not reused")
	}
	if *again != (item{}) {
		t.Fatalf("a reused value is not zeroed: %+v", *again)
	}
	if fresh := p.New(); seen[fresh] {
		t.Fatal("a value still handed out was handed out again")
	}
}

func TestValuesShareChunks(t *testing.T) {
	var p Pool[item]
	a, b := p.New(), p.New()
	if d := uintptr(unsafe.Pointer(b)) - uintptr(unsafe.Pointer(a)); d != unsafe.Sizeof(item{}) {
		t.Fatalf("consecutive values %d bytes apart, want %d (one chunk)", d, unsafe.Sizeof(item{}))
	}
}

func BenchmarkNewFree(b *testing.B) {
	var p Pool[item]
	keep := make([]*item, 0, 1024)
	for b.Loop() {
		keep = append(keep, p.New())
		if len(keep) == cap(keep) {
			for _, v := range keep {
				p.Free(v)
			}
			keep = keep[:0]
		}
	}
}
