// Package idmap is a map from strings (job IDs) to small values, for the
// indexes that hold an entry for every job a store has ever had.
//
// A Go map of a million string keys to 48-byte values takes about 140
// bytes an entry: 64-byte slots, half of them empty after the table last
// doubled, and it keeps a key's string as last assigned (m[k] = v stores
// k again), so a map updated from decoded events holds one more copy of
// each ID than the caller means to keep. Map keeps its entries in 64 KB
// chunks, each key beside its value, and finds them through a table of
// 4-byte positions (linear probing, at most three quarters full): a
// million entries of 48 bytes take about 72 MB. A key is stored when it
// is inserted and replaced only when asked (PutKey), so a caller can have
// the map share the string another index keeps.
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

type item[V any] struct {
	key string
	val V
}

// Map is a map from strings to values of V. The zero Map is empty and
// ready to use. It is not safe for concurrent use.
type Map[V any] struct {
	seed maphash.Seed
	// slots hold 1 + the index of an item, 0 for an empty slot.
	slots  []uint32
	chunks [][]item[V]
	// used is how many items have been handed out, free those handed
	// back, n those in the map.
	used uint32
	free []uint32
	n    int
	// hash, when set, replaces maphash (tests: keys that collide).
	hash func(string) uint64
}

func (m *Map[V]) at(i uint32) *item[V] {
	return &m.chunks[i>>chunkShift][i&(chunkItems-1)]
}

func (m *Map[V]) home(key string) int {
	if m.hash != nil {
		return int(m.hash(key) & uint64(len(m.slots)-1))
	}
	return int(maphash.String(m.seed, key) & uint64(len(m.slots)-1))
}

// find returns the slot holding key, or the empty slot where it would go.
func (m *Map[V]) find(key string) (slot int, found bool) {
	if len(m.slots) == 0 {
		return -1, false
	}
	mask := len(m.slots) - 1
	for i := m.home(key); ; i = (i + 1) & mask {
		s := m.slots[i]
		if s == 0 {
			return i, false
		}
		if m.at(s-1).key == key {
			return i, true
		}
	}
}

// Len is the number of keys in the map.
func (m *Map[V]) Len() int { return m.n }

// Get returns key's value and whether the map has key.
func (m *Map[V]) Get(key string) (V, bool) {
	if i, ok := m.find(key); ok {
		return m.at(m.slots[i] - 1).val, true
	}
	var zero V
	return zero, false
}

// Put sets key's value. A key already in the map keeps the string it was
// stored with.
func (m *Map[V]) Put(key string, v V) { m.put(key, v, false) }

// PutKey sets key's value and stores key as the map's string for it, so
// that the map shares key's memory with whatever else holds it.
func (m *Map[V]) PutKey(key string, v V) { m.put(key, v, true) }

func (m *Map[V]) put(key string, v V, rekey bool) {
	i, ok := m.find(key)
	if ok {
		it := m.at(m.slots[i] - 1)
		it.val = v
		if rekey {
			it.key = key
		}
		return
	}
	if (m.n+1)*4 > len(m.slots)*3 {
		m.grow()
		i, _ = m.find(key)
	}
	idx := m.alloc()
	*m.at(idx) = item[V]{key: key, val: v}
	m.slots[i] = idx + 1
	m.n++
}

func (m *Map[V]) alloc() uint32 {
	if n := len(m.free); n > 0 {
		idx := m.free[n-1]
		m.free = m.free[:n-1]
		return idx
	}
	idx := m.used
	if int(idx>>chunkShift) == len(m.chunks) {
		m.chunks = append(m.chunks, make([]item[V], chunkItems))
	}
	m.used++
	return idx
}

// grow doubles the table (or makes the first one) and places every item
// again.
func (m *Map[V]) grow() {
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
		i := m.home(m.at(s - 1).key)
		for m.slots[i] != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = s
	}
}

// Delete removes key; it reports whether the map had it.
func (m *Map[V]) Delete(key string) bool {
	i, ok := m.find(key)
	if !ok {
		return false
	}
	idx := m.slots[i] - 1
	*m.at(idx) = item[V]{}
	m.free = append(m.free, idx)
	m.n--
	// Shift back the items after it that would no longer be found: an
	// item may sit in slot j only if no empty slot lies between its home
	// and j.
	mask := len(m.slots) - 1
	for j := (i + 1) & mask; m.slots[j] != 0; j = (j + 1) & mask {
		h := m.home(m.at(m.slots[j] - 1).key)
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

// All yields every key and value, in no particular order. The map must
// not change during the iteration.
func (m *Map[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for _, s := range m.slots {
			if s == 0 {
				continue
			}
			it := m.at(s - 1)
			if !yield(it.key, it.val) {
				return
			}
		}
	}
}

// Clone returns a copy of the map that shares nothing with it but the
// keys' strings.
func (m *Map[V]) Clone() *Map[V] {
	c := &Map[V]{seed: m.seed, hash: m.hash, slots: append([]uint32(nil), m.slots...), used: m.used,
		free: append([]uint32(nil), m.free...), n: m.n, chunks: make([][]item[V], len(m.chunks))}
	for i, ch := range m.chunks {
		c.chunks[i] = append([]item[V](nil), ch...)
	}
	return c
}
