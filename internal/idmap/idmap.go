// Package idmap is a table of values found by job ID, for the indexes
// that hold an entry for every job a store has ever had.
//
// A Go map of a million string keys to 48-byte values takes about 140
// bytes an entry: 64-byte slots, half of them empty after the table last
// doubled, and each key's string besides (a 16-byte header and 28 bytes
// in a 32-byte slot). Table keeps its values in 64 KB chunks, each value
// holding its own job ID as a Key (17 bytes, no pointer), and finds them
// through a table of 4-byte positions (linear probing, at most three
// quarters full): an index of a million 112-byte entries takes 112 MB and
// 8 MB of positions, where a Go map with string keys took over 190 MB.
// A value's address does not change while it is in the table, so other
// structures may point at it.
package idmap

import (
	"hash/maphash"
	"iter"
)

const (
	chunkShift = 10
	chunkItems = 1 << chunkShift
	minSlots   = 1024
)

// Keyed is what a table holds: a value that knows its job's Key.
type Keyed interface {
	MapKey() Key
}

// Table is a set of values of V found by their Key. The zero Table is
// empty and ready to use. It is not safe for concurrent use.
type Table[V Keyed] struct {
	seed maphash.Seed
	// slots hold 1 + the index of a value, 0 for an empty slot.
	slots  []uint32
	chunks [][]V
	// used is how many values have been handed out, free those handed
	// back, n those in the table.
	used uint32
	free []uint32
	n    int
	// hash, when set, replaces maphash (tests: keys that collide).
	hash func(Key) uint64
}

func (m *Table[V]) at(i uint32) *V {
	return &m.chunks[i>>chunkShift][i&(chunkItems-1)]
}

func (m *Table[V]) home(key Key) int {
	if m.hash != nil {
		return int(m.hash(key) & uint64(len(m.slots)-1))
	}
	return int(maphash.Comparable(m.seed, key) & uint64(len(m.slots)-1))
}

// find returns the slot holding key, or the empty slot where it would go.
func (m *Table[V]) find(key Key) (slot int, found bool) {
	if len(m.slots) == 0 {
		return -1, false
	}
	mask := len(m.slots) - 1
	for i := m.home(key); ; i = (i + 1) & mask {
		s := m.slots[i]
		if s == 0 {
			return i, false
		}
		if (*m.at(s - 1)).MapKey() == key {
			return i, true
		}
	}
}

// Len is the number of values in the table.
func (m *Table[V]) Len() int { return m.n }

// Get returns the value of key, nil when the table has none. The pointer
// stays valid until key is deleted.
func (m *Table[V]) Get(key Key) *V {
	if key.IsZero() {
		return nil
	}
	if i, ok := m.find(key); ok {
		return m.at(m.slots[i] - 1)
	}
	return nil
}

// Put stores v under its key, in place of the value the table had for it,
// and returns where it is kept. A value with the zero Key is not stored
// (nil).
func (m *Table[V]) Put(v V) *V {
	key := v.MapKey()
	if key.IsZero() {
		return nil
	}
	i, ok := m.find(key)
	if ok {
		p := m.at(m.slots[i] - 1)
		*p = v
		return p
	}
	if (m.n+1)*4 > len(m.slots)*3 {
		m.grow()
		i, _ = m.find(key)
	}
	idx := m.alloc()
	p := m.at(idx)
	*p = v
	m.slots[i] = idx + 1
	m.n++
	return p
}

func (m *Table[V]) alloc() uint32 {
	if n := len(m.free); n > 0 {
		idx := m.free[n-1]
		m.free = m.free[:n-1]
		return idx
	}
	idx := m.used
	if int(idx>>chunkShift) == len(m.chunks) {
		m.chunks = append(m.chunks, make([]V, chunkItems))
	}
	m.used++
	return idx
}

// grow doubles the table (or makes the first one) and places every value
// again.
func (m *Table[V]) grow() {
	if len(m.slots) == 0 {
		m.seed = maphash.MakeSeed()
	}
	old := m.slots
	m.slots = make([]uint32, max(minSlots, 2*len(old)))
	mask := len(m.slots) - 1
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := m.home((*m.at(s - 1)).MapKey())
		for m.slots[i] != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = s
	}
}

// Delete removes key's value; it reports whether the table had one.
func (m *Table[V]) Delete(key Key) bool {
	if key.IsZero() {
		return false
	}
	i, ok := m.find(key)
	if !ok {
		return false
	}
	idx := m.slots[i] - 1
	var zero V
	*m.at(idx) = zero
	m.free = append(m.free, idx)
	m.n--
	// Shift back the items after it that would no longer be found: an
	// item may sit in slot j only if no empty slot lies between its home
	// and j.
	mask := len(m.slots) - 1
	for j := (i + 1) & mask; m.slots[j] != 0; j = (j + 1) & mask {
		h := m.home((*m.at(m.slots[j] - 1)).MapKey())
		// The item at j stays when its home is cyclically in (i, j].
		if (i <= j && i < h && h <= j) || (j < i && (i < h || h <= j)) {
			continue
		}
		m.slots[i] = m.slots[j]
		i = j
	}
	m.slots[i] = 0
	return true
}

// All yields every value, in no particular order. The table must not
// change during the iteration.
func (m *Table[V]) All() iter.Seq[*V] {
	return func(yield func(*V) bool) {
		for _, s := range m.slots {
			if s == 0 {
				continue
			}
			if !yield(m.at(s - 1)) {
				return
			}
		}
	}
}

// Clone returns a copy of the table that shares nothing with it (but what
// its values point to).
func (m *Table[V]) Clone() *Table[V] {
	c := &Table[V]{seed: m.seed, hash: m.hash, slots: append([]uint32(nil), m.slots...), used: m.used,
		free: append([]uint32(nil), m.free...), n: m.n, chunks: make([][]V, len(m.chunks))}
	for i, ch := range m.chunks {
		c.chunks[i] = append([]V(nil), ch...)
	}
	return c
}
