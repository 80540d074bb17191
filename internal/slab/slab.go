// Package slab allocates many small long-lived values of one type in
// chunks of about 64 KB.
//
// A server that takes a burst of work (100,000 submissions in a minute)
// allocates each job's index entries among far more short-lived garbage
// of the same size class; once the garbage is collected, every page of
// that class still holds a few entries and none can be given back: the
// heap in use stays twice the live heap. Entries allocated in chunks sit
// together, away from the garbage, and the pages the garbage used are
// freed whole.
package slab

import "unsafe"

// chunkBytes is about how much memory one chunk takes.
const chunkBytes = 64 << 10

// Pool hands out pointers to zeroed values of T, a chunk at a time, and
// takes them back for reuse. It is not safe for concurrent use: its owner
// guards it as it guards the values. A value handed back must no longer
// be used by anything that could tell it from a new one; a chunk stays
// in memory while any of its values is referenced. Freed values stay in
// the pool: it holds the memory of the most values ever out at once
// (a server's peak of jobs), which a new Pool gives back.
type Pool[T any] struct {
	chunk []T
	free  []*T
	live  int
}

// New returns a zeroed value.
func (p *Pool[T]) New() *T {
	p.live++
	if n := len(p.free); n > 0 {
		v := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		return v
	}
	if len(p.chunk) == cap(p.chunk) {
		var zero T
		n := max(1, chunkBytes/max(1, int(unsafe.Sizeof(zero))))
		p.chunk = make([]T, 0, n)
	}
	p.chunk = p.chunk[:len(p.chunk)+1]
	return &p.chunk[len(p.chunk)-1]
}

// Free zeroes v and keeps it for a later New.
func (p *Pool[T]) Free(v *T) {
	var zero T
	*v = zero
	p.live--
	p.free = append(p.free, v)
}

// Live is how many values are handed out and not freed.
func (p *Pool[T]) Live() int { return p.live }
