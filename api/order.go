package api

import (
	"iter"
	"slices"
	"sort"

	"github.com/spotwise/spotwise/internal/idmap"
)

// orderChunk is the most entries one chunk of a jobOrder holds: a change
// moves at most this many pointers, however many jobs the order holds.
const orderChunk = 512

// jobOrder is a list of entries by submission time, then ID, kept in
// chunks of at most orderChunk entries (none empty), so that putting a job
// in or taking one out costs a search and a move within one chunk, not a
// move of every job listed after it: with a million jobs listed, one
// slice would copy megabytes of pointers (each through the garbage
// collector's write barrier) on every change.
type jobOrder struct {
	chunks [][]*entry
	n      int
}

// cmpKey orders jobs by submission time (Unix nanoseconds), then ID.
func cmpKey(at int64, id idmap.Key, bt int64, bid idmap.Key) int {
	switch {
	case at < bt:
		return -1
	case at > bt:
		return 1
	}
	return id.Compare(bid)
}

// Len is how many entries the order holds.
func (o *jobOrder) Len() int { return o.n }

// find returns where a job submitted at at with ID id is, or would be: the
// chunk and the place in it. With no chunk at all it returns (0, 0).
func (o *jobOrder) find(at int64, id idmap.Key) (ci, i int, found bool) {
	if len(o.chunks) == 0 {
		return 0, 0, false
	}
	// The first chunk whose last entry is not before the key; past the
	// last chunk, the key goes at the end of the last one.
	ci = sort.Search(len(o.chunks), func(c int) bool {
		ch := o.chunks[c]
		last := ch[len(ch)-1]
		return cmpKey(last.submitted, last.key, at, id) >= 0
	})
	if ci == len(o.chunks) {
		ci--
		return ci, len(o.chunks[ci]), false
	}
	i, found = slices.BinarySearchFunc(o.chunks[ci], id, func(e *entry, id idmap.Key) int {
		return cmpKey(e.submitted, e.key, at, id)
	})
	return ci, i, found
}

func (o *jobOrder) insert(e *entry) {
	if len(o.chunks) == 0 {
		o.chunks = [][]*entry{append(make([]*entry, 0, orderChunk), e)}
		o.n++
		return
	}
	last := o.chunks[len(o.chunks)-1]
	if l := last[len(last)-1]; cmpKey(l.submitted, l.key, e.submitted, e.key) < 0 {
		// The newest job: the common case, an append.
		if len(last) == orderChunk {
			o.chunks = append(o.chunks, make([]*entry, 0, orderChunk))
		}
		o.chunks[len(o.chunks)-1] = append(o.chunks[len(o.chunks)-1], e)
		o.n++
		return
	}
	ci, i, found := o.find(e.submitted, e.key)
	if found {
		return
	}
	ch := slices.Insert(o.chunks[ci], i, e)
	o.n++
	if len(ch) <= orderChunk {
		o.chunks[ci] = ch
		return
	}
	// Split a full chunk in two halves, each with room to grow.
	half := len(ch) / 2
	lo := append(make([]*entry, 0, orderChunk), ch[:half]...)
	hi := append(make([]*entry, 0, orderChunk), ch[half:]...)
	o.chunks[ci] = lo
	o.chunks = slices.Insert(o.chunks, ci+1, hi)
}

func (o *jobOrder) remove(e *entry) {
	ci, i, found := o.find(e.submitted, e.key)
	if !found || o.chunks[ci][i] != e {
		return
	}
	o.n--
	ch := slices.Delete(o.chunks[ci], i, i+1)
	if len(ch) == 0 {
		o.chunks = slices.Delete(o.chunks, ci, ci+1)
		return
	}
	o.chunks[ci] = ch
}

// deleteFunc takes out every entry del says to and packs the rest, in
// place, into full chunks (but the last). Chunks are left part-full by
// inserts between jobs: a start brings the store's records in the order
// they were last written, not submitted, and splits chunk after chunk.
func (o *jobOrder) deleteFunc(del func(*entry) bool) {
	// The write position (chunk wc, place wi) never passes the read
	// position: a chunk is written only once it has been read, or at or
	// before the place being read.
	wc, wi := 0, 0
	for rc := range o.chunks {
		ch := o.chunks[rc]
		for _, e := range ch {
			if del(e) {
				continue
			}
			if wi == orderChunk {
				wc, wi = wc+1, 0
			}
			dst := o.chunks[wc]
			if wi >= len(dst) {
				if wi >= cap(dst) { // every chunk is made with room for orderChunk
					dst = append(make([]*entry, 0, orderChunk), dst...)
				}
				dst = dst[:wi+1]
			}
			dst[wi] = e
			o.chunks[wc] = dst
			wi++
		}
	}
	if wi == 0 {
		clear(o.chunks)
		o.chunks, o.n = nil, 0
		return
	}
	last := o.chunks[wc]
	clear(last[wi:len(last)])
	o.chunks[wc] = last[:wi]
	clear(o.chunks[wc+1:])
	o.chunks = o.chunks[:wc+1]
	o.n = wc*orderChunk + wi
}

// pack packs the entries into full chunks (see deleteFunc).
func (o *jobOrder) pack() { o.deleteFunc(func(*entry) bool { return false }) }

// all yields the entries oldest first.
func (o *jobOrder) all() iter.Seq[*entry] { return o.after(false, 0, idmap.Key{}) }

// after yields, oldest first, the entries ordered after a job submitted at
// at with ID id (which need not be in the order); every entry when from
// is false.
func (o *jobOrder) after(from bool, at int64, id idmap.Key) iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		ci, i := 0, 0
		if from {
			var found bool
			if ci, i, found = o.find(at, id); found {
				i++
			}
		}
		for ; ci < len(o.chunks); ci, i = ci+1, 0 {
			for _, e := range o.chunks[ci][i:] {
				if !yield(e) {
					return
				}
			}
		}
	}
}

// before yields, newest first, the entries ordered before a job submitted
// at at with ID id (which need not be in the order); every entry when
// from is false.
func (o *jobOrder) before(from bool, at int64, id idmap.Key) iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		if len(o.chunks) == 0 {
			return
		}
		ci := len(o.chunks) - 1
		i := len(o.chunks[ci])
		if from {
			ci, i, _ = o.find(at, id)
		}
		for ; ci >= 0; ci-- {
			ch := o.chunks[ci]
			for i--; i >= 0; i-- {
				if !yield(ch[i]) {
					return
				}
			}
			if ci > 0 {
				i = len(o.chunks[ci-1])
			}
		}
	}
}
