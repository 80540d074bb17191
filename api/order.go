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
//
// Each chunk has a mask of the teams and states of its jobs, so that a
// listing of one team's jobs, or of jobs in a rare state, passes over the
// chunks that hold none of them: a small team's page in a store of a
// million jobs of other teams reads a few chunks, not every job.
type jobOrder struct {
	chunks [][]*entry
	// masks holds each chunk's mask: at least the bits of the jobs in it
	// (a job taken out, or one whose state changed, leaves its bits until
	// the chunk is rebuilt).
	masks []chunkMask
	n     int
	// bits numbers the teams; nil: every job has every team's bit.
	bits *teamBits
}

// chunkMask is a set of teams (their bits, teamBits) and of states (a bit
// for each of job.States, by index).
type chunkMask struct {
	teams  uint64
	states uint16
}

// anyJob is the mask that passes over no chunk.
var anyJob = chunkMask{^uint64(0), ^uint16(0)}

// meets reports whether a chunk with mask m may hold a job of want.
func (m chunkMask) meets(want chunkMask) bool {
	return m.teams&want.teams != 0 && m.states&want.states != 0
}

func (m *chunkMask) add(b chunkMask) {
	m.teams |= b.teams
	m.states |= b.states
}

// teamBits gives each team a bit of the chunks' masks: the first 64 teams
// seen a bit of their own, later ones share (a chunk's bit then says it
// may hold the team's jobs, as a Bloom filter's does). Its map is written
// under the index's write lock only.
type teamBits struct{ m map[string]uint64 }

// of is a team's bit, given one if it has none.
func (t *teamBits) of(team string) uint64 {
	b, ok := t.m[team]
	if !ok {
		if t.m == nil {
			t.m = map[string]uint64{}
		}
		b = 1 << (len(t.m) % 64)
		t.m[team] = b
	}
	return b
}

// lookup is a team's bit; ok is false for a team no job was ever listed
// with.
func (t *teamBits) lookup(team string) (bit uint64, ok bool) {
	bit, ok = t.m[team]
	return bit, ok
}

// bit is e's bits in this order's masks.
func (o *jobOrder) bit(e *entry) chunkMask {
	b := chunkMask{teams: ^uint64(0), states: 1 << e.state}
	if o.bits != nil {
		b.teams = o.bits.of(e.teamName())
	}
	return b
}

// maskOf is the exact mask of a chunk's jobs.
func (o *jobOrder) maskOf(ch []*entry) chunkMask {
	var m chunkMask
	for _, e := range ch {
		m.add(o.bit(e))
	}
	return m
}

// mark adds the bits of e, listed, to its chunk's mask: its state changed.
func (o *jobOrder) mark(e *entry) {
	if ci, i, found := o.find(e.submitted, e.key); found && o.chunks[ci][i] == e {
		o.masks[ci].add(o.bit(e))
	}
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
		o.masks = []chunkMask{o.bit(e)}
		o.n++
		return
	}
	last := o.chunks[len(o.chunks)-1]
	if l := last[len(last)-1]; cmpKey(l.submitted, l.key, e.submitted, e.key) < 0 {
		// The newest job: the common case, an append.
		if len(last) == orderChunk {
			o.chunks = append(o.chunks, make([]*entry, 0, orderChunk))
			o.masks = append(o.masks, chunkMask{})
		}
		lc := len(o.chunks) - 1
		o.chunks[lc] = append(o.chunks[lc], e)
		o.masks[lc].add(o.bit(e))
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
		o.masks[ci].add(o.bit(e))
		return
	}
	// Split a full chunk in two halves, each with room to grow.
	half := len(ch) / 2
	lo := append(make([]*entry, 0, orderChunk), ch[:half]...)
	hi := append(make([]*entry, 0, orderChunk), ch[half:]...)
	o.chunks[ci] = lo
	o.chunks = slices.Insert(o.chunks, ci+1, hi)
	o.masks[ci] = o.maskOf(lo)
	o.masks = slices.Insert(o.masks, ci+1, o.maskOf(hi))
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
		o.masks = slices.Delete(o.masks, ci, ci+1)
		return
	}
	o.chunks[ci] = ch
}

// holds reports whether e's place is within chunk ch.
func holds(ch []*entry, e *entry) bool {
	first, last := ch[0], ch[len(ch)-1]
	return cmpKey(first.submitted, first.key, e.submitted, e.key) <= 0 && cmpKey(e.submitted, e.key, last.submitted, last.key) <= 0
}

// removeAll takes out the entries del says to in the chunks that hold
// the entries es (those of es not listed are ignored): each such chunk is
// filtered in place and gets its exact mask back; one left empty is
// dropped, and one whose jobs fit in the chunk before it is merged into
// it. A retention round takes out the oldest 10,000 jobs of a million:
// their 20 chunks, not a move of every job (deleteFunc), under the
// index's write lock.
func (o *jobOrder) removeAll(es []*entry, del func(*entry) bool) {
	var touched []int
	last := -1
	for _, e := range es {
		if last >= 0 && holds(o.chunks[last], e) {
			continue // in order, most jobs of a round share a chunk
		}
		if ci, _, found := o.find(e.submitted, e.key); found {
			touched = append(touched, ci)
			last = ci
		}
	}
	if len(touched) == 0 {
		return
	}
	slices.Sort(touched)
	touched = slices.Compact(touched)
	for _, ci := range touched {
		ch := o.chunks[ci]
		kept := slices.DeleteFunc(ch, del)
		o.n -= len(ch) - len(kept)
		o.chunks[ci] = kept
		o.masks[ci] = o.maskOf(kept)
	}
	// Drop or merge the touched chunks, moving the chunk list once.
	w, t := touched[0], 0
	for r := touched[0]; r < len(o.chunks); r++ {
		ch, m := o.chunks[r], o.masks[r]
		isTouched := t < len(touched) && touched[t] == r
		if isTouched {
			t++
		}
		switch {
		case len(ch) == 0:
			continue
		case isTouched && w > 0 && len(o.chunks[w-1])+len(ch) <= orderChunk:
			o.chunks[w-1] = append(o.chunks[w-1], ch...)
			o.masks[w-1].add(m)
			continue
		}
		o.chunks[w], o.masks[w] = ch, m
		w++
	}
	clear(o.chunks[w:])
	o.chunks, o.masks = o.chunks[:w], o.masks[:w]
	if len(o.chunks) == 0 {
		o.chunks, o.masks = nil, nil
	}
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
	// A written chunk's mask is that of the chunks its jobs came from:
	// perhaps more than its jobs' own, never less.
	masks := make([]chunkMask, len(o.chunks))
	for rc := range o.chunks {
		ch := o.chunks[rc]
		for _, e := range ch {
			if del(e) {
				continue
			}
			if wi == orderChunk {
				wc, wi = wc+1, 0
			}
			masks[wc].add(o.masks[rc])
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
		o.chunks, o.masks, o.n = nil, nil, 0
		return
	}
	last := o.chunks[wc]
	clear(last[wi:len(last)])
	o.chunks[wc] = last[:wi]
	clear(o.chunks[wc+1:])
	o.chunks = o.chunks[:wc+1]
	o.masks = masks[:wc+1]
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
// from is false. It passes over the chunks whose mask does not meet want
// (anyJob: none is passed over).
func (o *jobOrder) before(from bool, at int64, id idmap.Key, want chunkMask) iter.Seq[*entry] {
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
			if o.masks[ci].meets(want) {
				ch := o.chunks[ci]
				for i--; i >= 0; i-- {
					if !yield(ch[i]) {
						return
					}
				}
			}
			if ci > 0 {
				i = len(o.chunks[ci-1])
			}
		}
	}
}
